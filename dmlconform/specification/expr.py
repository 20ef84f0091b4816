"""Small arithmetic expressions written in the spec (an activation's ``cancellation`` scale).

The spec states error scales as formulas of the activation's input ``x`` and its parameters,
e.g. ``0.5*abs(x)`` or ``abs(Alpha*Gamma)``. They are parsed here with Python's ``ast`` and
only numbers, the allowed names, ``+ - * /``, unary minus, ``abs`` and ``max`` are accepted, so
a spec file can never run code. Evaluation is vectorized over numpy arrays.
"""

from __future__ import annotations

import ast
import functools
from types import CodeType
from typing import Any

import numpy as np

_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.USub,
    ast.Constant,
    ast.Name,
    ast.Call,
    ast.Load,
)
_FUNCTIONS = {"abs": np.abs, "max": np.maximum}


class ExprError(ValueError):
    """An expression outside the allowed grammar, or naming an unknown variable."""


@functools.lru_cache(maxsize=256)
def compile_expr(text: str, names: tuple[str, ...]) -> CodeType:
    """Check ``text`` against the grammar and the variable ``names``; return it compiled."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"{text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise ExprError(f"{text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise ExprError(f"{text!r}: only numbers are allowed as constants")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords
        ):
            raise ExprError(f"{text!r}: only abs(...) and max(..., ...) may be called")
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCTIONS:
            raise ExprError(f"{text!r}: unknown name {node.id!r} (known: {', '.join(names)})")
    return compile(tree, "<spec expression>", "eval")


def evaluate(text: str, **variables: Any) -> np.ndarray:
    """The value of ``text`` with ``variables`` bound (arrays broadcast)."""
    code = compile_expr(text, tuple(sorted(variables)))
    return np.asarray(eval(code, {"__builtins__": {}, **_FUNCTIONS}, variables), dtype=np.float64)  # noqa: S307


_BINARY = {ast.Add: 2, ast.Sub: 3, ast.Mult: 4, ast.Div: 5}


def postfix(text: str, variable: str, constants: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """``text`` as a postfix program for the judge's compiled interpreter
    (:func:`dmlconform.tolerance.float_bits.run_program`): (opcodes, constants), with every name but
    ``variable`` replaced by its value from ``constants``. Same grammar as :func:`evaluate`."""
    code = compile_expr(text, tuple(sorted({variable, *constants})))
    tree = ast.parse(text, mode="eval")
    del code  # checked above; the tree is walked below
    ops: list[int] = []
    consts: list[float] = []

    def emit(op: int, value: float = 0.0) -> None:
        ops.append(op)
        consts.append(value)

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            walk(node.body)
        elif isinstance(node, ast.Constant):
            emit(0, float(node.value))
        elif isinstance(node, ast.Name):
            emit(1) if node.id == variable else emit(0, float(constants[node.id]))
        elif isinstance(node, ast.UnaryOp):
            walk(node.operand)
            emit(6)
        elif isinstance(node, ast.BinOp):
            walk(node.left)
            walk(node.right)
            emit(_BINARY[type(node.op)])
        elif isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            for arg in node.args:
                walk(arg)
            emit(7 if node.func.id == "abs" else 8)

    walk(tree)
    return np.asarray(ops, dtype=np.int64), np.asarray(consts, dtype=np.float64)
