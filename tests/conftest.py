"""Fixtures shared by the test modules, and the ``slow`` marker put on the tests that are slow by
their kind (helpers.py holds the shared builders and constants)."""

from __future__ import annotations

import ast
import compileall
import contextlib
import functools
import importlib
import os
import re
from pathlib import Path

import pytest
from hypothesis import settings

# In CI the property tests draw the same examples on every run (derandomize: each test's examples
# follow from its own source), so that a red CI run is red again on a rerun and on a developer's
# machine with CI=true; elsewhere they explore afresh each run. HYPOTHESIS_PROFILE picks either.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))


def pytest_configure(config: pytest.Config) -> None:
    """Write the checkout's bytecode once, before any test starts a process.

    Hundreds of tests start ``dmlconform`` (or a backend's isolated process) from this checkout;
    where the environment sets PYTHONDONTWRITEBYTECODE (this project's machines do), no process
    leaves its bytecode behind, and each compiled the whole package from source again: a second
    or two of every start. Reading bytecode is not writing it, so written once here it serves
    every process. xdist's workers skip it: the controller has done it before they start."""
    if hasattr(config, "workerinput"):
        return
    root = Path(__file__).resolve().parent.parent
    for tree in (root / "dmlconform", root / "tests"):
        compileall.compile_dir(tree, quiet=2, workers=1)


@pytest.fixture(scope="session", autouse=True)
def native_modules_loaded() -> None:
    """Load numba's lazily imported modules and the native backends before any in-process run.

    pytester's in-process runs restore ``sys.modules`` when the test ends, deleting every module
    first imported during the test. A second import of such a module breaks the process: numba's
    typing modules ("duplicate registration"), torch's C extension ("bad call flags"), onnx's
    protobuf extension (abort); jax's and OpenVINO's runtimes likewise. A session fixture is set up before the function-scoped
    ``pytester`` takes its snapshot, so what is loaded here stays loaded. It is autouse because
    which test first imports a library depends on how xdist spreads the tests over workers."""
    import numpy as np

    from dmlconform.kernels import execute
    from dmlconform.specification.desc import parse_desc

    t = {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "NormalizeVariance": True},
        }
    )
    execute(desc, {"InputTensor": np.ones((1, 1, 2, 2), np.float32)})
    # that case is small enough for the numpy mirror: compile once, so that numba's lowering
    # modules (loaded at the first compile) load here too; dropped and imported again, they made
    # explicit-signature kernels refuse matching arguments ("No matching definition")
    with contextlib.suppress(ImportError):
        import numba

        numba.njit(lambda a: a[0] + 1.0)(np.zeros(1))
    for name in (
        "dmlconform.reference.compiled",
        "dmlconform.tolerance.judge_compiled",
        "torch",
        "onnx",
        "onnxruntime",
        "dmlconform.backends.torch_backend",
        "dmlconform.backends.onnxruntime_backend",
        "openvino",
        "dmlconform.backends.openvino_backend",
        "jax",
        "dmlconform.backends.jax_backend",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


#: Test modules slow as a whole: long reductions (2^24-element inputs), the report in a browser,
#: runs stopped by signals.
SLOW_MODULES = frozenset({"test_long_reductions", "test_report_browser", "test_signals", "test_completeness"})
#: Calls that start a dmlconform process (a backend's isolated one included), or a pytest run
#: in-process: seconds each.
SLOW_CALLS = re.compile(
    r"\bdmlconform\(|\bstart_run\(|\bsubprocess\.|\brun_suite\(|\bmain\(\s*\[\s*\"run\"|\bProcessGuard\("
)


def is_slow(item: pytest.Item) -> bool:
    """A pytester test, a test that starts a process, or one of SLOW_MODULES: the fast lane
    (``-m "not slow"``) leaves these out."""
    if "pytester" in getattr(item, "fixturenames", ()) or item.module.__name__ in SLOW_MODULES:
        return True
    functions = [item.function]  # the test and the fixtures it uses (a fixture may run the CLI)
    for defs in item._fixtureinfo.name2fixturedefs.values():
        functions += [d.func for d in defs if d.baseid]  # the project's fixtures, not pytest's
    return any(_starts_a_process(function) for function in functions)


def _starts_a_process(function: object) -> bool:
    """Whether the function's source makes a call of SLOW_CALLS."""
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    source = _function_sources(code.co_filename).get(code.co_firstlineno)
    return source is not None and bool(SLOW_CALLS.search(source))


@functools.cache
def _function_sources(filename: str) -> dict[int, str]:
    """Each function of a file by the line its code starts at (its first decorator's), from one
    parse of the file: inspect.getsource on each of 800 functions took 1.4 s of every worker's
    collection, and once per parametrized item 8 s."""
    try:
        text = Path(filename).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return {}
    lines = text.splitlines()
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[first] = "\n".join(lines[first - 1 : node.end_lineno])
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and is_slow(item):
            item.add_marker(pytest.mark.slow)
