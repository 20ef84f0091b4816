"""Deliberately broken backends, for mutation self-tests of the suite.

Each class is the numpy backend with exactly one bug that real implementations have had (see
directml-facts.md, "Known real-world failures"). A conformance suite worth running must fail
every one of them; the mutation test runs the suite against each and expects failures. Select
one with ``--dml-backend dmlconform.backends.broken:UnbiasedVariance``.

The docstring of each says which kind of case exposes it, so a surviving mutant points at the
generator regime or tolerance that is missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

import numpy as np

import dmlconform as dc
from dmlconform.backends.numpy_backend import NumpyBackend, reduce_sum, slice_rows
from dmlconform.tolerance.degenerate import unchanged_inputs


class UnbiasedVariance(NumpyBackend):
    """Variance divided by n - 1 (Bessel's correction, as torch.var defaults to).

    Exposed by short reductions (n = 2 scales z by sqrt(1/2); n = 1 divides by zero)."""

    name: ClassVar[str] = "broken:UnbiasedVariance"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        mean, var = super().statistics(x, axes)
        n = math.prod(x.shape[a] for a in axes)
        return mean, var * self.compute_dtype(n) / self.compute_dtype(n - 1)


class EpsilonOutsideSqrt(NumpyBackend):
    """(x - mean) / (sqrt(var) + eps) instead of / sqrt(var + eps).

    Exposed by data whose spread is near sqrt(Epsilon), and by zero-variance slices."""

    name: ClassVar[str] = "broken:EpsilonOutsideSqrt"

    def normalize(
        self, x: np.ndarray, mean: np.ndarray, var: np.ndarray, plan: dc.NormalizationPlan
    ) -> np.ndarray:
        d = x - mean
        if not plan.normalize_variance:
            return d
        return d / (np.sqrt(var) + self.compute_dtype(plan.epsilon))


class Float16Statistics(NumpyBackend):
    """Mean and variance accumulated in FLOAT16 (the LayerNorm fp16 overflow seen in the wild).

    Exposed by fp16 data whose squares overflow fp16 (|x - mean| > 256 gives inf), by long
    reductions (fp16 sums stall), and by large offsets."""

    name: ClassVar[str] = "broken:Float16Statistics"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        h = x.astype(np.float16)
        n = np.float16(math.prod(x.shape[a] for a in axes))
        mean = np.sum(h, axis=axes, keepdims=True, dtype=np.float16) / n
        d = h - mean
        var = np.sum(d * d, axis=axes, keepdims=True, dtype=np.float16) / n
        return mean.astype(self.compute_dtype), var.astype(self.compute_dtype)


class IgnoredActivation(NumpyBackend):
    """FusedActivation dropped: the output is the plain normalization.

    Exposed by any case with a fused activation other than IDENTITY."""

    name: ClassVar[str] = "broken:IgnoredActivation"

    def activate(self, y: np.ndarray, plan: dc.NormalizationPlan) -> np.ndarray:
        return y


class ScaleReversed(NumpyBackend):
    """Scale indexed back to front along every axis (a stride / transposition mix-up: channel
    c gets the scale of channel C-1-c).

    Exposed by any non-uniform Scale with a dimension larger than 1."""

    name: ClassVar[str] = "broken:ScaleReversed"

    def scale_bias(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        if plan.scale is not None:
            scale = self.load(inputs, plan, plan.scale)
            y = y * scale[(slice(None, None, -1),) * scale.ndim]
        if plan.bias is not None:
            y = y + self.load(inputs, plan, plan.bias)
        return y


class NaiveVariance(NumpyBackend):
    """Variance as E[x^2] - E[x]^2 in float32: catastrophic cancellation.

    Exposed by data with a large offset against a small spread (kappa = |mean| / std >> 1);
    the variance can even come out negative, and sqrt then gives NaN."""

    name: ClassVar[str] = "broken:NaiveVariance"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        mean = np.mean(x, axis=axes, keepdims=True, dtype=self.compute_dtype)
        mean_sq = np.mean(x * x, axis=axes, keepdims=True, dtype=self.compute_dtype)
        return mean, mean_sq - mean * mean


class OneSidedBiasIgnored(NumpyBackend):
    """Bias applied only when Scale is present too (pre-5_2 pairing assumed at every level).

    Exposed by a desc with a Bias and a null Scale, legal from feature level 5_2."""

    name: ClassVar[str] = "broken:OneSidedBiasIgnored"

    def scale_bias(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        if plan.scale is None:
            return y
        return super().scale_bias(y, inputs, plan)


class BatchAxisIncluded(NumpyBackend):
    """Statistics over the batch axis too: the {0, 2, 3} reading of CrossChannel=FALSE from
    older doc revisions, applied to every reduction.

    Exposed by any case with a batch dimension larger than 1 that is not already reduced."""

    name: ClassVar[str] = "broken:BatchAxisIncluded"

    def reduce_axes(self, plan: dc.NormalizationPlan) -> tuple[int, ...]:
        return tuple(sorted({0, *plan.axes}))


class FusedAddAfterActivation(NumpyBackend):
    """FusedAddTensor added after the activation instead of before it.

    Exposed by a FusedAddTensor with any activation that is not linear over the data."""

    name: ClassVar[str] = "broken:FusedAddAfterActivation"

    def add_and_activate(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        y = self.activate(y, plan)
        return y if plan.fused_add is None else y + self.load(inputs, plan, plan.fused_add)


class UnbiasedVarianceReported(NumpyBackend):
    """Normalizes with the population variance but reports the sample (n - 1) variance, the
    estimate PyTorch keeps as its running variance.

    Exposed by any VarianceTensor output over a short reduction."""

    name: ClassVar[str] = "broken:UnbiasedVarianceReported"

    def reported_statistics(
        self, mean: np.ndarray, var: np.ndarray, x: np.ndarray, axes: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        n = math.prod(x.shape[a] for a in axes)
        return mean, var * self.compute_dtype(n / max(n - 1, 1))


class ActivationParametersIgnored(NumpyBackend):
    """The fused activation's parameters replaced by their documented defaults.

    Exposed by any activation given a non-default parameter (LEAKY_RELU Alpha 0.1, ...)."""

    name: ClassVar[str] = "broken:ActivationParametersIgnored"

    def activate(self, y: np.ndarray, plan: dc.NormalizationPlan) -> np.ndarray:
        if plan.activation is None:
            return y
        act = self.spec.activations[plan.activation]
        defaults = {p.name: p.default for p in act.parameters if p.default is not None}
        return super().activate(y, replace(plan, activation_params={**plan.activation_params, **defaults}))


class EpsilonIgnored(NumpyBackend):
    """(x - mean) / sqrt(var): Epsilon dropped.

    Exposed by data whose variance is near Epsilon, and by constant slices (0/0)."""

    name: ClassVar[str] = "broken:EpsilonIgnored"

    def normalize(
        self, x: np.ndarray, mean: np.ndarray, var: np.ndarray, plan: dc.NormalizationPlan
    ) -> np.ndarray:
        return super().normalize(x, mean, var, replace(plan, epsilon=0.0))


class SequentialSumStatistics(NumpyBackend):
    """Mean and variance from plain sequential float32 sums (a loop over the slice in order).

    Sound for short reductions; at long ones the running sum's spacing outgrows the addends and
    the mean stagnates (z off by several standard deviations at n = 2^22 on offset data). Only
    the long reductions of the default and stress tiers expose it."""

    name: ClassVar[str] = "broken:SequentialSumStatistics"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return sequential_statistics(x, axes)


def sequential_statistics(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two passes, each a float32 running sum in element order (np.cumsum is sequential)."""
    rows = slice_rows(x, axes).astype(np.float32)
    stat = [1 if i in axes else s for i, s in enumerate(x.shape)]
    n = np.float32(rows.shape[1])
    mean = np.cumsum(rows, axis=1, dtype=np.float32)[:, -1:] / n
    d = rows - mean
    var = np.cumsum(d * d, axis=1, dtype=np.float32)[:, -1:] / n
    return mean.reshape(stat), var.reshape(stat)


class Float16AccumulationAtLongReductions(NumpyBackend):
    """Statistics accumulated in FLOAT16 once a reduction is long (a kernel that switches to a
    half-precision accumulator for long rows), float32 otherwise.

    Only reductions of LONG_ROW elements or more expose it."""

    name: ClassVar[str] = "broken:Float16AccumulationAtLongReductions"
    LONG_ROW: ClassVar[int] = 65536

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        n = math.prod(x.shape[a] for a in axes)
        if n < self.LONG_ROW:
            return super().statistics(x, axes)
        h = x.astype(np.float16)
        mean = np.mean(h, axis=axes, keepdims=True, dtype=np.float16)
        d = h - mean
        var = np.mean(d * d, axis=axes, keepdims=True, dtype=np.float16)
        return mean.astype(self.compute_dtype), var.astype(self.compute_dtype)


class OutputScaled(NumpyBackend):
    """OutputTensor 2^-8 too large: every element off by the same fraction of itself (~32,000
    FLOAT32 ULP), a systematic error of the kind a wrong constant or a mis-scaled accumulator
    makes.

    The budget's ceiling (2^-10 of the output's own scale for FLOAT32) exposes it at every n;
    without the ceiling, long ill-conditioned reductions let it pass."""

    name: ClassVar[str] = "broken:OutputScaled"
    FACTOR: ClassVar[float] = 1.0 + 2.0**-8

    def add_and_activate(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        return super().add_and_activate(y, inputs, plan) * self.compute_dtype(self.FACTOR)


class OutputScaledFourUlps(OutputScaled):
    """OutputTensor times 1 + 2^-22 (4 u): 2 to 4 FLOAT32 ULP, systematic, the error of a wrong
    rsqrt or a folded constant. Within every element's budget; the slices' fit (pooled over the
    tensor) finds it where the data makes a sound implementation's scale error smaller, the
    ``exact_statistics`` regime."""

    name: ClassVar[str] = "broken:OutputScaledFourUlps"
    FACTOR: ClassVar[float] = 1.0 + 2.0**-22


class Zeros(NumpyBackend):
    """Every output all zeros: an implementation that computes nothing.

    Every numeric case must expose it: none is generated whose reference is identically zero
    (``dmlconform.generation.data``, degenerate cases)."""

    name: ClassVar[str] = "broken:Zeros"

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: np.zeros_like(v) for k, v in super().execute(desc, inputs).items()}


class Negated(NumpyBackend):
    """Every output the right answer negated (a sign slip).

    Every numeric case must expose it: a reference that is not identically zero differs from
    its negation by twice itself."""

    name: ClassVar[str] = "broken:Negated"

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: -v for k, v in super().execute(desc, inputs).items()}


class InputUnchanged(NumpyBackend):
    """Every output an input of the same Sizes returned unchanged, the normalized input first
    (zeros where none matches; ``degenerate.unchanged_inputs``): an implementation that copies
    instead of computing.

    Every numeric case must expose it: none is generated whose outputs equal their inputs."""

    name: ClassVar[str] = "broken:InputUnchanged"

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return unchanged_inputs(desc, super().execute(desc, inputs), inputs, self.spec)


class LrnWindowBelow(NumpyBackend):
    """An even LocalSize's window reaching one element further below than above (PyTorch's
    local_response_norm pads floor(n/2) below), not above as the spec's window (ONNX's, and
    DirectML's: cases/directml/lrn-even-window).

    Exposed by every even LocalSize; odd ones place the window alike."""

    name: ClassVar[str] = "broken:LrnWindowBelow"

    def lrn_window(self, plan: dc.LocalResponsePlan) -> tuple[int, int]:
        return plan.local_size // 2, (plan.local_size - 1) // 2


class LrnAlphaNotDivided(NumpyBackend):
    """Alpha times the window's sum of squares, not Alpha / LocalSize times it (Caffe's and
    cuDNN's convention differ here; the spec's formula divides).

    Exposed by LocalSize > 1 with Alpha != 0."""

    name: ClassVar[str] = "broken:LrnAlphaNotDivided"

    def lrn_alpha(self, plan: dc.LocalResponsePlan, dt: type) -> np.floating:
        return dt(plan.alpha)


class LpWithoutAbs(NumpyBackend):
    """P = 1's norm as the plain sum of x, without the absolute value (ONNX's reference before
    it was fixed): [1, -1] has norm 0.

    Exposed by any P = 1 slice holding a negative value."""

    name: ClassVar[str] = "broken:LpWithoutAbs"

    def lp_norm(self, x: np.ndarray, plan: dc.LpNormalizationPlan, dt: type) -> np.ndarray:
        if plan.p == 1:
            return reduce_sum(x, plan.axes, dt)
        return super().lp_norm(x, plan, dt)


class LpEpsilonOutsideRoot(NumpyBackend):
    """x / (norm + Epsilon): Epsilon added to the norm outside the root, not to the squared norm
    under it (cases/directml/lp-epsilon-placement).

    Exposed by Epsilon comparable to the squared norm (relative error ~ Epsilon / norm)."""

    name: ClassVar[str] = "broken:LpEpsilonOutsideRoot"

    def lp_denominator(self, norm: np.ndarray, plan: dc.LpNormalizationPlan, dt: type) -> np.ndarray:
        return norm + dt(plan.epsilon)


#: Every broken backend, by class name (the mutation test iterates over this).
BROKEN_BACKENDS: dict[str, type[NumpyBackend]] = {
    cls.__name__: cls
    for cls in (
        UnbiasedVariance,
        EpsilonOutsideSqrt,
        Float16Statistics,
        IgnoredActivation,
        ScaleReversed,
        NaiveVariance,
        OneSidedBiasIgnored,
        BatchAxisIncluded,
        FusedAddAfterActivation,
        UnbiasedVarianceReported,
        ActivationParametersIgnored,
        EpsilonIgnored,
        SequentialSumStatistics,
        Float16AccumulationAtLongReductions,
        OutputScaled,
        Zeros,
        Negated,
        InputUnchanged,
        LrnWindowBelow,
        LrnAlphaNotDivided,
        LpWithoutAbs,
        LpEpsilonOutsideRoot,
    )
}

__all__ = ["BROKEN_BACKENDS", *BROKEN_BACKENDS]
