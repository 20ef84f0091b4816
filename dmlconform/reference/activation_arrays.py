"""The fused activation of float64 arrays, by the reference kernel's scalar formulas: the
kernels beside the centred normalization apply it elementwise, and the tolerance model
propagates its error bounds through it."""

from __future__ import annotations

import numpy as np

from dmlconform.reference import MIRROR_MAX_ELEMENTS
from dmlconform.reference.activations import activation_args
from dmlconform.reference.mirror import activate_array


def activation(act_type: str | None, y: np.ndarray, params: dict[str, float]) -> np.ndarray:
    """The fused activation of float64 ``y``: per element in Python (the mirror's IEEE-safe
    loop) for small tensors, so that they neither import nor compile numba, through the compiled
    kernel's ``activate`` for large ones."""
    code, a, b = activation_args(act_type, params)
    if code == 0:
        return y
    flat = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if flat.size <= MIRROR_MAX_ELEMENTS:
        out = activate_array(code, flat, a, b)
    else:
        from dmlconform.reference.compiled import activate_all

        out = np.empty_like(flat)
        activate_all(code, flat, a, b, out)
    return out.reshape(np.shape(y))
