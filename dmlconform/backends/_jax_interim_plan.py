"""TEMPORARY: the plan API's fields (notes/PLAN_API.md) read from the semantics plans, until
dc.plan lands on main. Deleted at the merge."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from dmlconform import kernels
from dmlconform.backends.base import numpy_dtype


class InterimPlan(SimpleNamespace):
    def dtype(self, member: str) -> np.dtype:
        return self._dtypes[member]

    def sizes(self, member: str) -> tuple[int, ...]:
        return tuple(self.tensors[member].sizes)

    def aligned_sizes(self, member: str) -> tuple[int, ...]:
        s = self.sizes(member)
        return (1,) * (len(self.shape) - len(s)) + s

    @property
    def reduction_length(self) -> int:
        return math.prod(self.shape[a] for a in self.axes)

    def finish(self, values: dict[str, Any]) -> dict[str, np.ndarray]:
        out = {}
        for m in self.outputs:
            v = np.asarray(values[m])
            sizes = self.sizes(m)
            if v.shape != sizes:
                v = v.reshape(sizes) if v.size == math.prod(sizes) else np.broadcast_to(v, sizes)
            with np.errstate(over="ignore"):
                out[m] = np.ascontiguousarray(v, dtype=self.dtype(m))
        return out


def plan(desc: Any, spec: Any) -> InterimPlan:
    name = kernels.kernel_name(desc, spec)
    sp = kernels.part(desc, spec, "plan")(desc, spec)
    tensors = {k: v for k, v in desc.tensors().items()}
    fields = dict(vars(sp)) if hasattr(sp, "__dict__") else {}
    import dataclasses

    fields = {f.name: getattr(sp, f.name) for f in dataclasses.fields(sp)}
    ins = tuple(sp.input_members())
    outs = tuple(sp.output_members())
    centre: Any = None
    if name == "normalization":
        centre = "mean"
    elif name == "given_statistics":
        centre = sp.mean
    elif name == "normalization_grad":
        centre = sp.mean if (sp.statistics == "given" or sp.centre_with == "mean") else "mean"
    fields.pop("shape", None)
    return InterimPlan(
        kernel=name,
        operator=desc.operator,
        shape=tuple(sp.shape),
        inputs=ins,
        outputs=outs,
        tensors=tensors,
        _dtypes={m: numpy_dtype(t.data_type, spec) for m, t in tensors.items()},
        centre=centre,
        activation=getattr(sp, "activation", None),
        activation_params=dict(getattr(sp, "activation_params", {}) or {}),
        **{k: v for k, v in fields.items() if k not in ("activation", "activation_params")},
    )
