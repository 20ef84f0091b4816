"""Test backends for findings scoped to slices (tests/test_scoped_findings.py): the numpy backend
with LP's FLOAT16 squared norm held in FLOAT16, saturated at 65504 (DirectML's F10 mechanism),
and the same with one NaN planted away from the saturated slices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.kernels import plan as plan_of

F16_MAX = 65504.0


class SaturatingLp(NumpyBackend):
    """LP FLOAT16 divides by the root of the squared norm held in FLOAT16: min(norm^2, 65504)."""

    name: ClassVar[str] = "numpy"

    def saturated(self, desc: Any, inputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Which output elements are in a slice whose squared norm passes 65504 (None: not LP)."""
        if desc.operator != "LP_NORMALIZATION" or inputs["InputTensor"].dtype != np.float16:
            return None
        plan = plan_of(desc, self.spec)
        x = np.asarray(inputs[plan.input], dtype=np.float64)
        norm = np.sum(np.abs(x), axis=plan.axes, keepdims=True) ** 2 if plan.p == 1 else None
        norm = norm if norm is not None else np.sum(x * x, axis=plan.axes, keepdims=True)
        return np.broadcast_to(norm > F16_MAX, x.shape)

    def execute(self, desc: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().execute(desc, inputs)
        over = self.saturated(desc, inputs)
        if over is not None and over.any():
            x = np.asarray(inputs["InputTensor"], dtype=np.float64)
            held = (x / np.sqrt(F16_MAX)).astype(np.float16)
            out["OutputTensor"] = np.where(over, held, out["OutputTensor"])
        return out


class SaturatingLpNanOutside(SaturatingLp):
    """:class:`SaturatingLp` with a NaN in the last element of a slice whose norm is in range,
    in the cases that have both kinds of slice."""

    def execute(self, desc: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().execute(desc, inputs)
        over = self.saturated(desc, inputs)
        if over is not None and over.any() and not over.all():
            flat = out["OutputTensor"].reshape(-1)
            flat[np.flatnonzero(~over.reshape(-1))[-1]] = np.nan
        return out
