"""The ``torch`` backend (extra ``torch``): PyTorch on the CPU by default, CUDA on request.

Like the ONNX Runtime backend, it maps a desc onto the library kernel a PyTorch user would call
when one fits, because that is what a conformance run should measure:

=================  ========================================================================
path               used when (see :class:`NormalizationPlan`)
=================  ========================================================================
instance_norm      NormalizeVariance, rank >= 3, axes = {2, ..., rank-1}, Scale and Bias
                   null or per-channel: ``F.instance_norm``
batch_norm         NormalizeVariance, rank >= 2, axes = {0, 2, ..., rank-1}, Scale and Bias
                   null or per-channel: ``F.batch_norm(training=True)`` (no running stats)
layer_norm         NormalizeVariance, axes = a trailing run k..rank-1, Scale and Bias vary
                   only along it: ``F.layer_norm``
var_mean           everything else: ``torch.var_mean(correction=0)`` and elementwise ops
=================  ========================================================================

Statistics outputs always come from ``torch.var_mean(correction=0)`` (the population
variance; ``F.batch_norm``'s running variance is the unbiased one, so it cannot serve).
Activations go through ``torch.nn.functional`` where its parameterization matches DirectML's
(HARD_SIGMOID and SHRINK with independent Bias/Threshold are composed from elementwise ops).

FLOAT16 runs in float16 (unless the option ``float16=float32``) when PyTorch implements the kernels for it on the device, otherwise the
case is recomputed in float32 and ``last_info()`` records the upcast and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from dmlconform.backends.base import (
    FEATURE_LEVEL_OPTION,
    BackendBase,
    NormalizationPlan,
    Option,
    finish_outputs,
    make_plan,
)
from dmlconform.desc import OperatorDesc
from dmlconform.errors import Unsupported

PATHS = ("instance_norm", "batch_norm", "layer_norm", "var_mean")
_TORCH_DTYPE = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16}


def _parse_device(text: str) -> str:
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text == "cpu":
        return text
    if text == "cuda" or text.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"CUDA is not available to this torch build ({torch.__version__})")
        torch.device(text)  # validates cuda:N syntax
        return text
    raise ValueError("expected cpu, cuda, cuda:N or auto")


def _shrink(x: torch.Tensor, p: Mapping[str, float]) -> torch.Tensor:
    bias, threshold = p["Bias"], p["Threshold"]
    zero = torch.zeros_like(x)
    return torch.where(x > threshold, x - bias, torch.where(x < -threshold, x + bias, zero))


_ACTIVATIONS: dict[str, Callable[[torch.Tensor, Mapping[str, float]], torch.Tensor]] = {
    "ACTIVATION_IDENTITY": lambda x, p: x,
    "ACTIVATION_LINEAR": lambda x, p: x * p["Alpha"] + p["Beta"],
    "ACTIVATION_SIGMOID": lambda x, p: torch.sigmoid(x),
    # F.hardsigmoid hard-codes Alpha = 1/6: compose DirectML's parameterized form instead.
    "ACTIVATION_HARD_SIGMOID": lambda x, p: torch.clamp(x * p["Alpha"] + p["Beta"], 0.0, 1.0),
    "ACTIVATION_TANH": lambda x, p: torch.tanh(x),
    "ACTIVATION_SCALED_TANH": lambda x, p: torch.tanh(x * p["Beta"]) * p["Alpha"],
    "ACTIVATION_RELU": lambda x, p: F.relu(x),
    "ACTIVATION_LEAKY_RELU": lambda x, p: F.leaky_relu(x, p["Alpha"]),
    "ACTIVATION_THRESHOLDED_RELU": lambda x, p: F.threshold(x, p["Alpha"], 0.0),
    "ACTIVATION_ELU": lambda x, p: F.elu(x, p["Alpha"]),
    # F.selu hard-codes its constants; gamma * elu(x, alpha) is DirectML's SCALED_ELU exactly.
    "ACTIVATION_SCALED_ELU": lambda x, p: F.elu(x, p["Alpha"]) * p["Gamma"],
    "ACTIVATION_SOFTPLUS": lambda x, p: F.softplus(x, beta=p["Steepness"]),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda x, p: F.softplus(x * p["Beta"]) * p["Alpha"],
    "ACTIVATION_SOFTSIGN": lambda x, p: F.softsign(x),
    "ACTIVATION_SHRINK": _shrink,
    "ACTIVATION_CELU": lambda x, p: F.celu(x, p["Alpha"]),
    "ACTIVATION_GELU": lambda x, p: F.gelu(x),
}


def _batch_kernel_ok(plan: NormalizationPlan) -> bool:
    """F.batch_norm(training=True) and F.instance_norm (which calls it) reject what DirectML
    accepts: Epsilon 0 ("batch_norm eps must be positive during training") and a reduction over
    one element ("Expected more than 1 value per channel / spatial element when training")."""
    return plan.epsilon > 0 and math.prod(plan.shape[a] for a in plan.axes) > 1


def choose_path(plan: NormalizationPlan) -> str:
    """The first path of :data:`PATHS` (in order of preference) that fits the desc."""
    return next(p for p in PATHS if path_fits(plan, p))


def path_fits(plan: NormalizationPlan, path: str) -> bool:
    return {
        "instance_norm": lambda: plan.fits_instance_norm() and _batch_kernel_ok(plan),
        "batch_norm": lambda: plan.fits_batch_norm() and _batch_kernel_ok(plan),
        "layer_norm": plan.fits_layer_norm,
        "var_mean": lambda: True,
    }[path]()


def _is_dtype_gap(exc: Exception) -> bool:
    """A RuntimeError that says the kernel has no float16 version on this device."""
    text = str(exc)
    return isinstance(exc, (RuntimeError, NotImplementedError)) and (
        "Half" in text or "not implemented for" in text or "float16" in text
    )


class TorchBackend(BackendBase):
    """PyTorch through torch.nn.functional; see the module docstring for the paths."""

    name: ClassVar[str] = "torch"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option("device", "cpu", "cpu, cuda, cuda:N, or auto (cuda when available)", parse=_parse_device),
        Option(
            "float16",
            "float32",
            "FLOAT16 descs: computed in float16, or in float32 and rounded once at the end (default float32, as a sound FLOAT16 implementation accumulates in float32)",
            ("native", "float32"),
        ),
        Option(
            "path", "auto", "force one PyTorch mapping (auto picks the kernel that fits)", ("auto", *PATHS)
        ),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.device = torch.device(self.options["device"])

    # -- protocol ---------------------------------------------------------------------------

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        plan = make_plan(desc)
        io = plan.dtypes[plan.input]
        if io not in _TORCH_DTYPE:
            raise Unsupported(f"data type {io} is not mapped to torch by this backend")
        forced = self.options["path"]
        if forced != "auto" and not path_fits(plan, forced):
            raise Unsupported(f"path={forced} does not fit this desc")
        path = forced if forced != "auto" else choose_path(plan)
        info: dict[str, Any] = {
            "path": path,
            "device": str(self.device),
            "compute_dtype": io.name,
            "upcast": False,
        }
        if self.options["float16"] == "float32" and io != np.dtype(np.float32):
            info.update(compute_dtype="float32", upcast=True, upcast_reason="option float16=float32")
            io = np.dtype(np.float32)
        try:
            values = self._run(plan, inputs, path, _TORCH_DTYPE[io])
        except Exception as exc:
            if io == np.dtype(np.float32) or not _is_dtype_gap(exc):
                raise
            values = self._run(plan, inputs, path, torch.float32)
            info.update(compute_dtype="float32", upcast=True, upcast_reason=str(exc).splitlines()[0][:200])
        if plan.stats_outputs:
            info["statistics"] = "var_mean"
        self._last_info = info
        return finish_outputs(plan, values)

    def versions(self) -> dict[str, str]:
        out = {**super().versions(), "torch": torch.__version__}
        if self.device.type == "cuda":
            out["cuda"] = str(torch.version.cuda)
            out["gpu"] = torch.cuda.get_device_name(self.device)
        return out

    def describe(self) -> str:
        where = str(self.device)
        if self.device.type == "cuda":
            where += f" ({torch.cuda.get_device_name(self.device)}, CUDA {torch.version.cuda})"
        return f"torch {torch.__version__} on {where} (feature level {self.feature_level})"

    # -- computation ------------------------------------------------------------------------

    def _tensor(
        self, plan: NormalizationPlan, inputs: Mapping[str, np.ndarray], member: str, dtype: Any
    ) -> torch.Tensor:
        arr = np.array(inputs[member], copy=True).reshape(plan.aligned_sizes(member))
        return torch.from_numpy(arr).to(device=self.device, dtype=dtype)

    def _channel(
        self, plan: NormalizationPlan, inputs: Mapping[str, np.ndarray], member: str | None, dtype: Any
    ) -> torch.Tensor | None:
        if member is None:
            return None
        t = self._tensor(plan, inputs, member, dtype)
        return t.reshape(-1).expand(plan.shape[1]).contiguous()

    def _stats(self, x: torch.Tensor, axes: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        if not axes:  # torch reduces over every dim for dim=(); DirectML over none
            return x, torch.zeros_like(x)
        var, mean = torch.var_mean(x, dim=axes, correction=0, keepdim=True)
        return mean, var

    def _run(
        self, plan: NormalizationPlan, inputs: Mapping[str, np.ndarray], path: str, dtype: Any
    ) -> dict[str, np.ndarray]:
        with torch.no_grad():
            x = self._tensor(plan, inputs, plan.input, dtype)
            eps = plan.epsilon
            stats: tuple[torch.Tensor, torch.Tensor] | None = None
            if path == "instance_norm":
                w, b = (
                    self._channel(plan, inputs, plan.scale, dtype),
                    self._channel(plan, inputs, plan.bias, dtype),
                )
                y = F.instance_norm(x, weight=w, bias=b, eps=eps)
            elif path == "batch_norm":
                w, b = (
                    self._channel(plan, inputs, plan.scale, dtype),
                    self._channel(plan, inputs, plan.bias, dtype),
                )
                y = F.batch_norm(x, None, None, weight=w, bias=b, training=True, momentum=0.0, eps=eps)
            elif path == "layer_norm":
                k = plan.trailing_axis()
                assert k is not None
                shape = tuple(plan.shape[k:])

                def trailing(member: str | None) -> torch.Tensor | None:
                    if member is None:
                        return None
                    t = self._tensor(plan, inputs, member, dtype)
                    return t.reshape(t.shape[k:]).expand(shape).contiguous()

                y = F.layer_norm(x, shape, weight=trailing(plan.scale), bias=trailing(plan.bias), eps=eps)
            else:
                stats = self._stats(x, plan.axes)
                y = x - stats[0]
                if plan.normalize_variance:
                    y = y / torch.sqrt(stats[1] + eps)
                if plan.scale is not None:
                    y = y * self._tensor(plan, inputs, plan.scale, dtype)
                if plan.bias is not None:
                    y = y + self._tensor(plan, inputs, plan.bias, dtype)
            if plan.fused_add is not None:
                y = y + self._tensor(plan, inputs, plan.fused_add, dtype)
            if plan.activation is not None:
                fn = _ACTIVATIONS.get(plan.activation)
                if fn is None:
                    raise Unsupported(f"fused activation {plan.activation} has no torch mapping")
                y = fn(y, plan.activation_params)
            values = {plan.output: y}
            if plan.stats_outputs:
                mean, var = stats if stats is not None else self._stats(x, plan.axes)
                values.update(
                    {
                        plan.stats_outputs[k]: v
                        for k, v in (("mean", mean), ("variance", var))
                        if k in plan.stats_outputs
                    }
                )
            return {m: v.detach().cpu().numpy() for m, v in values.items()}
