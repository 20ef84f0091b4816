"""Shared pieces of the LRN / LRN_GRAD / LP experiments (cases/directml/lrn-*, lrng-*, lp-*).

Each experiment runs one question on real DirectML through the ``directml`` backend and prints
DirectML's output beside the candidate readings, computed here in float64 numpy (written for the
experiments, independent of the suite's reference). It exits 0 when DirectML matches the reading
the spec adopted (docs/family-experiments.md), 1 otherwise.

    python cases/directml/<name>/experiment.py [--version 1.15.4]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

LRN = "DML_OPERATOR_LOCAL_RESPONSE_NORMALIZATION"
LRNG = "DML_OPERATOR_LOCAL_RESPONSE_NORMALIZATION_GRAD"
LP = "DML_OPERATOR_LP_NORMALIZATION"


def backend() -> Any:
    from dmlconform.backends.directml.backend import DirectMLBackend

    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default=None, help="an installed DirectML release (default: 1.15.4)")
    args = ap.parse_args()
    be = DirectMLBackend(**({"version": args.version} if args.version else {}))
    print(be.describe())
    return be


def tensor(sizes: tuple[int, ...], dtype: str = "FLOAT32") -> dict[str, Any]:
    return {"DataType": dtype, "Sizes": list(sizes)}


def run(be: Any, op: str, members: dict[str, Any], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from dmlconform.specification.desc import parse_desc

    return be.execute(parse_desc({"type": op, "desc": members}), inputs)


def lrn_members(
    shape: tuple[int, ...], cc: bool, n: int, alpha: float, beta: float, bias: float
) -> dict[str, Any]:
    return {
        "InputTensor": tensor(shape),
        "OutputTensor": tensor(shape),
        "CrossChannel": cc,
        "LocalSize": n,
        "Alpha": alpha,
        "Beta": beta,
        "Bias": bias,
    }


def window_sum(v: np.ndarray, axes: list[int], below: int, above: int) -> np.ndarray:
    """sum of v over [i - below, i + above] along each axis in turn, clipped to the axis."""
    out = np.asarray(v, np.float64)
    for ax in axes:
        new = np.zeros_like(out)
        size = out.shape[ax]
        for c in range(size):
            src = [slice(None)] * out.ndim
            src[ax] = slice(max(0, c - below), min(size - 1, c + above) + 1)
            dst = [slice(None)] * out.ndim
            dst[ax] = c
            new[tuple(dst)] = out[tuple(src)].sum(axis=ax)
        out = new
    return out


def lrn_d(
    x: np.ndarray, cc: bool, n: int, alpha: float, bias: float, below: int, above: int, div: float
) -> np.ndarray:
    return bias + alpha / div * window_sum(
        np.asarray(x, np.float64) ** 2, [1] if cc else [2, 3], below, above
    )


def lrn_grad(
    x: np.ndarray,
    g: np.ndarray,
    cc: bool,
    n: int,
    alpha: float,
    beta: float,
    bias: float,
    *,
    transposed: bool,
) -> np.ndarray:
    """g d^-beta - (2 alpha beta / n) x sum(g x d^(-beta-1)) over the transposed region (the
    true gradient) or over the forward region."""
    below, above = (n - 1) // 2, n // 2
    x = np.asarray(x, np.float64)
    g = np.asarray(g, np.float64)
    d = lrn_d(x, cc, n, alpha, bias, below, above, n)
    t = g * x * d ** (-beta - 1)
    s = window_sum(t, [1] if cc else [2, 3], above if transposed else below, below if transposed else above)
    return g * d**-beta - 2 * alpha * beta / n * x * s


def report(rows: list[tuple[str, float]], adopted: str, tol: float) -> None:
    """Print max |DirectML - reading| per reading; exit 0 if the adopted one is within tol."""
    for name, err in rows:
        print(f"  {name:<40} max |DirectML - reading| = {err:.3g}")
    best = dict(rows)[adopted]
    print(f"adopted reading: {adopted} ({'reproduced' if best <= tol else 'NOT reproduced'})")
    sys.exit(0 if best <= tol else 1)
