"""The ``normalization`` kernel: a centred normalization over the reduced axes, with optional
Scale, Bias, FusedAdd, a fused activation and the mean and variance as outputs
(MEAN_VARIANCE_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION1, MEAN_VARIANCE_NORMALIZATION2 with
UseMean TRUE, BATCH_NORMALIZATION_TRAINING).

Output = act(Scale * (Input - mean) / sqrt(variance + Epsilon) + Bias + FusedAdd), the mean and
the population variance taken over ``axes``. A desc whose semantics turn the mean step off
(``semantics.center`` false) runs the ``rms_normalization`` kernel instead (:func:`variant`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.errors import PlanError
from dmlconform.kernels.base import (
    KernelPlan,
    centres,
    common,
    f32,
    fused_activation,
    member_value,
    need,
    present,
    semantics_of,
    tensor,
)
from dmlconform.kernels.registry import SAME_OUTPUT_RELATIONS, Kernel, SliceFacts, spread_over
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.slices import to_slices
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class NormalizationPlan(KernelPlan):
    """A centred normalization. ``scale``, ``bias``, ``fused_add`` name the members the desc
    sets (None: Scale 1, Bias 0, no add); ``mean_output`` / ``variance_output`` the statistics
    outputs it asks for. ``epsilon`` is 0 where the variance is not divided out."""

    kernel: ClassVar[str] = "normalization"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input", "scale", "bias", "fused_add")
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output", "mean_output", "variance_output")

    input: str
    output: str
    scale: str | None = None
    bias: str | None = None
    fused_add: str | None = None
    mean_output: str | None = None
    variance_output: str | None = None
    normalize_variance: bool = True
    epsilon: float = 0.0

    @property
    def centre(self) -> str | None:
        return "mean"

    # -- the questions a library mapping asks ---------------------------------------------

    def per_channel(self, member: str | None) -> bool:
        """Whether ``member`` is null or varies at most along axis 1 (the channel): the shape
        per-channel library kernels (instance / batch norm) take as a 1-D weight."""
        if member is None:
            return True
        if self.rank < 2:
            return False
        return all(s == 1 for i, s in enumerate(self.aligned_sizes(member)) if i != 1)

    def within(self, member: str | None, first_axis: int) -> bool:
        """Whether ``member`` is null or varies only along axes >= ``first_axis``."""
        return member is None or all(s == 1 for s in self.aligned_sizes(member)[:first_axis])

    def trailing_axis(self) -> int | None:
        """k when the reduced axes are exactly k..rank-1 (a layer-norm shape), else None."""
        if not self.axes:
            return None
        k = self.axes[0]
        return k if self.axes == tuple(range(k, self.rank)) else None

    def fits_instance_norm(self) -> bool:
        """Axes {2, ..., rank-1}, variance divided out, Scale and Bias per channel."""
        return (
            self.normalize_variance
            and self.rank >= 3
            and self.axes == tuple(range(2, self.rank))
            and self.per_channel(self.scale)
            and self.per_channel(self.bias)
        )

    def fits_batch_norm(self) -> bool:
        """Axes {0, 2, ..., rank-1}, variance divided out, Scale and Bias per channel."""
        return (
            self.normalize_variance
            and self.rank >= 2
            and self.axes == (0, *range(2, self.rank))
            and self.per_channel(self.scale)
            and self.per_channel(self.bias)
        )

    def fits_layer_norm(self) -> bool:
        """Axes a trailing run k..rank-1, variance divided out, Scale and Bias varying only
        along it."""
        k = self.trailing_axis()
        return (
            self.normalize_variance
            and k is not None
            and self.within(self.scale, k)
            and self.within(self.bias, k)
        )


def read_common(desc: OperatorDesc, spec: Spec) -> dict[str, Any]:
    """The fields the centred and the uncentred plans share."""
    sem = semantics_of(desc, spec)
    need(desc, sem, "output", spec)
    normalize = bool(member_value(desc, sem.get("normalize_variance", True), spec, "NormalizeVariance"))
    epsilon = f32(member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")) if normalize else 0.0
    activation, params = fused_activation(desc, sem, spec)
    return {
        **common(desc, spec),
        "input": str(sem["input"]),
        "output": str(sem["output"]),
        "scale": present(desc, sem, "scale", spec),
        "bias": present(desc, sem, "bias", spec),
        "fused_add": present(desc, sem, "fused_add", spec),
        "normalize_variance": normalize,
        "epsilon": epsilon,
        "activation": activation,
        "activation_params": params,
    }


def build_plan(desc: OperatorDesc, spec: Spec) -> NormalizationPlan:
    """The plan of a centred normalization desc; PlanError for one whose mean step is off (its
    kernel is ``rms_normalization``) or that lacks a member."""
    if not centres(desc, spec):
        raise PlanError(
            f"{desc.operator}: the mean step is off (semantics.center false): kernel rms_normalization"
        )
    sem = semantics_of(desc, spec)
    return NormalizationPlan(
        **read_common(desc, spec),
        mean_output=present(desc, sem, "mean_output", spec),
        variance_output=present(desc, sem, "variance_output", spec),
    )


def variant(desc: OperatorDesc, spec: Spec) -> str | None:
    """The kernel a desc runs instead of this one: ``rms_normalization`` where its semantics turn
    the mean step off."""
    try:
        return None if centres(desc, spec) else "rms_normalization"
    except PlanError:
        return None  # the plan builder reports the missing member


def execute(
    desc: OperatorDesc,
    inputs: dict[str, Any],
    spec: Spec,
    *,
    float64: bool = False,
    out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The float64 reference: the numba kernel or its bit-identical numpy mirror
    (:func:`dmlconform.reference.normalize_outputs`)."""
    return reference.normalize_outputs(build_plan(desc, spec), desc, inputs, spec, float64=float64, out=out)


def facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> dict[str, float]:
    """The largest and smallest variance of the case's slices, in float64: about the mean, or
    about 0 where the kernel does not centre (this is also the ``rms_normalization`` kernel's
    ``facts`` part).

    An expectation names by the largest the cases whose variance leaves FLOAT16's range: DirectML
    holds a FLOAT16 variance in FLOAT16, saturated at 65504 past it in some shaders (F1;
    cases/directml/mvn1-fp16-variance-saturates). Below FLOAT16's normal range the
    ``fp16-statistics`` model itself holds the variance to FLOAT16's subnormal spacing. By the
    smallest, the cases where an Epsilon the implementation drops would show: OpenVINO's FLOAT16
    graphs round an Epsilon under 2^-25 to 0 (OV6; cases/openvino/float16-epsilon-flushed)."""
    fields = read_common(desc, spec)
    slices = to_slices(np.asarray(inputs[fields["input"]], dtype=np.float64), fields["axes"])
    # what the kernel divides out: the second moment about the mean, or about 0 (uncentred)
    divided = np.var(slices, axis=1) if centres(desc, spec) else np.mean(slices * slices, axis=1)
    return {"largest_variance": float(np.max(divided)), "smallest_variance": float(np.min(divided))}


def slice_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> SliceFacts:
    """``variance``: each slice's variance, about the mean or about 0 where the kernel does not
    centre (the ``rms_normalization`` kernel's part too): what the output divides by the root
    of. A slice's variance decides its own output elements and its element of the Variance
    output; the Mean output does not read it. ``mean``: each slice's mean (here, where the
    kernel centres), which names the one-element slices whose value is negative: DirectML takes
    a one-element slice's variance to be its value, so x + Epsilon <= 0 is a NaN (F5;
    cases/directml/mvn1-one-element-nan/experiment.py)."""
    fields = read_common(desc, spec)
    x = np.asarray(inputs[fields["input"]], dtype=np.float64)
    axes, centred = fields["axes"], centres(desc, spec)
    mean = np.mean(x, axis=axes, keepdims=True)
    divided = np.var(x, axis=axes, keepdims=True) if centred else np.mean(x * x, axis=axes, keepdims=True)
    variance = present(desc, semantics_of(desc, spec), "variance_output", spec) if centred else None

    def spread(mask: np.ndarray) -> dict[str, np.ndarray]:
        out = {
            name: spread_over(mask, _sizes(desc, name, spec)) for name in (fields["output"], variance) if name
        }
        return {k: v for k, v in out.items() if v is not None}

    return SliceFacts({"variance": divided, "mean": mean}, spread)


def _sizes(desc: OperatorDesc, name: str | None, spec: Spec) -> tuple[int, ...] | None:
    t = tensor(desc, name, spec)
    return None if t is None else tuple(t.sizes)


KERNEL = Kernel(
    name="normalization",
    summary="centred normalization over reduce axes, with optional scale, bias, add, activation",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.normalization:budgets",
    model="normalization",
    relations=SAME_OUTPUT_RELATIONS,
    variant=variant,
    variants=("rms_normalization",),
    judge="dmlconform.tolerance.judge:plan_for",
    facts=facts,
    slice_facts=slice_facts,
    slice_fact_names=("variance", "mean"),
    fact_names=("largest_variance", "smallest_variance"),
    bytes_per_element=80,
)
