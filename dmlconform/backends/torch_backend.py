"""The ``torch`` backend (extra ``torch``): PyTorch on the CPU by default, CUDA on request.

Like the ONNX Runtime backend, it maps a desc onto the library kernel a PyTorch user would call
when one fits, because that is what a conformance run should measure:

=================  ========================================================================
path               used when (see :class:`dmlconform.NormalizationPlan`)
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

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, Option

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


def _batch_kernel_ok(plan: dc.NormalizationPlan) -> bool:
    """F.batch_norm(training=True) and F.instance_norm (which calls it) reject what DirectML
    accepts: Epsilon 0 ("batch_norm eps must be positive during training") and a reduction over
    one element ("Expected more than 1 value per channel / spatial element when training")."""
    return plan.epsilon > 0 and math.prod(plan.shape[a] for a in plan.axes) > 1


def choose_path(plan: dc.NormalizationPlan) -> str:
    """The first path of :data:`PATHS` (in order of preference) that fits the desc."""
    return next(p for p in PATHS if path_fits(plan, p))


def path_fits(plan: dc.NormalizationPlan, path: str) -> bool:
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

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        plan = dc.plan(desc, self.spec)
        lower = LOWERINGS.get(plan.kernel)
        if lower is None:
            raise dc.Unsupported(
                f"{desc.operator}: kernel {plan.kernel!r} is not implemented by the torch backend"
            )
        return lower(self, plan, inputs)

    def _normalization(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        io = plan.dtype(plan.input)
        if io not in _TORCH_DTYPE:
            raise dc.Unsupported(f"data type {io} is not mapped to torch by this backend")
        forced = self.options["path"]
        if forced != "auto" and not path_fits(plan, forced):
            raise dc.Unsupported(f"path={forced} does not fit this desc")
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
        if plan.mean_output or plan.variance_output:
            info["statistics"] = "var_mean"
        self._last_info = info
        return plan.finish(values)

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

    def _execute_other(
        self, plan: dc.KernelPlan, inputs: Mapping[str, np.ndarray], compute: Callable[..., Any]
    ) -> dict[str, np.ndarray]:
        """The kernels beside the centred normalization: F.batch_norm in inference mode (given
        statistics), F.rms_norm (no mean step), autograd (the gradients). FLOAT16 is computed in
        float32 unless ``float16=native``."""
        io = plan.dtypes.get(plan.input, np.dtype("V"))
        if io not in _TORCH_DTYPE:
            raise dc.Unsupported(f"data type {io} is not mapped to torch by this backend")
        if self.options["float16"] == "float32":
            io = np.dtype(np.float32)
        dtype = _TORCH_DTYPE[io]

        def t(member: str | None) -> torch.Tensor | None:
            if member is None:
                return None
            arr = np.array(inputs[member], copy=True)
            return torch.from_numpy(arr).to(device=self.device, dtype=dtype)

        values, path = compute(plan, t)
        self._last_info = {"path": path, "device": str(self.device), "compute_dtype": io.name}
        return plan.finish({m: v.detach().cpu().numpy() for m, v in values.items()})

    # -- computation ------------------------------------------------------------------------

    def _tensor(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray], member: str, dtype: Any
    ) -> torch.Tensor:
        arr = np.array(inputs[member], copy=True).reshape(plan.aligned_sizes(member))
        return torch.from_numpy(arr).to(device=self.device, dtype=dtype)

    def _channel(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray], member: str | None, dtype: Any
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
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray], path: str, dtype: Any
    ) -> dict[str, np.ndarray]:
        with torch.no_grad():
            x = self._tensor(plan, inputs, plan.input, dtype)
            y, stats = self._normalize(plan, inputs, path, dtype, x)
            if plan.fused_add is not None:
                y = y + self._tensor(plan, inputs, plan.fused_add, dtype)
            y = _activate(y, plan.activation, plan.activation_params)
            values = {plan.output: y}
            if plan.mean_output or plan.variance_output:
                mean, var = stats if stats is not None else self._stats(x, plan.axes)
                values.update({m: v for m, v in ((plan.mean_output, mean), (plan.variance_output, var)) if m})
            return {m: v.detach().cpu().numpy() for m, v in values.items()}

    def _normalize(
        self,
        plan: dc.NormalizationPlan,
        inputs: Mapping[str, np.ndarray],
        path: str,
        dtype: Any,
        x: torch.Tensor,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """The normalized (scaled, biased) tensor by ``path``, and the statistics where the path
        computed them itself (the formula's var_mean; the torch.nn.functional paths give none)."""
        eps = plan.epsilon
        if path in ("instance_norm", "batch_norm"):
            w, b = (
                self._channel(plan, inputs, plan.scale, dtype),
                self._channel(plan, inputs, plan.bias, dtype),
            )
            if path == "instance_norm":
                return F.instance_norm(x, weight=w, bias=b, eps=eps), None
            return F.batch_norm(x, None, None, weight=w, bias=b, training=True, momentum=0.0, eps=eps), None
        if path == "layer_norm":
            return self._layer_norm(plan, inputs, dtype, x), None
        return self._var_mean(plan, inputs, dtype, x)

    def _layer_norm(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray], dtype: Any, x: torch.Tensor
    ) -> torch.Tensor:
        k = plan.trailing_axis()
        assert k is not None
        shape = tuple(plan.shape[k:])

        def trailing(member: str | None) -> torch.Tensor | None:
            if member is None:
                return None
            t = self._tensor(plan, inputs, member, dtype)
            return t.reshape(t.shape[k:]).expand(shape).contiguous()

        return F.layer_norm(x, shape, weight=trailing(plan.scale), bias=trailing(plan.bias), eps=plan.epsilon)

    def _var_mean(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray], dtype: Any, x: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The ``var_mean`` path: DirectML's formula elementwise from torch.var_mean, for any desc."""
        stats = self._stats(x, plan.axes)
        y = x - stats[0]
        if plan.normalize_variance:
            y = y / torch.sqrt(stats[1] + plan.epsilon)
        if plan.scale is not None:
            y = y * self._tensor(plan, inputs, plan.scale, dtype)
        if plan.bias is not None:
            y = y + self._tensor(plan, inputs, plan.bias, dtype)
        return y, stats


# --------------------------------------------------------------------------------------------
# The kernels beside the centred normalization

Loader = Callable[[str | None], "torch.Tensor | None"]


def _per_channel(t: torch.Tensor, rank: int) -> bool:
    return t.dim() == rank and rank >= 2 and all(s == 1 for i, s in enumerate(t.shape) if i != 1)


def _activate(y: torch.Tensor, act: str | None, params: Mapping[str, float]) -> torch.Tensor:
    if act is None:
        return y
    fn = _ACTIVATIONS.get(act)
    if fn is None:
        raise dc.Unsupported(f"fused activation {act} has no torch mapping")
    return fn(y, params)


def _given_torch(p: dc.GivenStatisticsPlan, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """F.batch_norm(training=False) where Mean, Variance, Scale and Bias are per-channel; else
    the documented formula elementwise."""
    with torch.no_grad():
        x, mean, var, scale, bias = (t(m) for m in (p.input, p.mean, p.variance, p.scale, p.bias))
        rank = len(p.shape)
        ops = (mean, var, scale, bias)
        if all(o is not None and _per_channel(o, rank) for o in ops):
            c = p.shape[1]
            vec = [o.reshape(-1).expand(c).contiguous() for o in ops]  # type: ignore[union-attr]
            y = F.batch_norm(x, vec[0], vec[1], weight=vec[2], bias=vec[3], training=False, eps=p.epsilon)
            path = "batch_norm-inference"
        else:
            y = (x - mean) / torch.sqrt(var + p.epsilon)
            if scale is not None:
                y = y * scale
            if bias is not None:
                y = y + bias
            path = "elementwise"
        return {p.output: _activate(y, p.activation, p.activation_params)}, path


def _rms_torch(p: dc.RmsNormalizationPlan, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """F.rms_norm over a trailing run of axes (weight = Scale where it varies only along them);
    otherwise x * rsqrt(mean(x^2) + Epsilon)."""
    with torch.no_grad():
        x = t(p.input)
        assert x is not None
        scale = t(p.scale)
        rank, axes = x.dim(), p.axes
        k = axes[0] if axes and axes == tuple(range(axes[0], rank)) else None
        path = "identity-variance"
        y = x
        if p.normalize_variance and k is not None:
            shape = tuple(x.shape[k:])
            w = None
            if scale is not None and all(s == 1 for s in scale.shape[:k]):
                w, scale = scale.reshape(scale.shape[k:]).expand(shape).contiguous(), None
            y = F.rms_norm(x, shape, weight=w, eps=p.epsilon)
            path = "rms_norm"
        elif p.normalize_variance:
            y = x * torch.rsqrt(torch.mean(x * x, dim=axes, keepdim=True) + p.epsilon)
            path = "rsqrt-mean-square"
        if scale is not None:
            y = y * scale
        for m in (p.bias, p.fused_add):
            if m is not None:
                y = y + t(m)
        return {p.output: _activate(y, p.activation, p.activation_params)}, path


def _grad_torch(p: dc.NormalizationGradPlan, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """torch.autograd through the forward batch normalization. ``given``: Mean and Variance are
    constants. ``batch``: their values are the given tensors but their gradients are the batch
    mean's and (population) variance's, the variance taken about the Mean member where the spec
    centres on it (``centre_with: mean``)."""
    x, dy, mean, var, scale = (t(m) for m in (p.input, p.input_gradient, p.mean, p.variance, p.scale))
    assert x is not None and dy is not None and mean is not None and var is not None and scale is not None
    x = x.clone().requires_grad_(True)
    scale = scale.clone().requires_grad_(True)
    bias = torch.zeros_like(scale, requires_grad=True)
    if p.statistics == "batch":
        if p.centres_on_mean:
            # centred on the Mean member (semantics.centre_with: mean): the variance's gradient is
            # that of mean((x - Mean)^2), the mean's that of the batch mean (x itself without axes)
            sq = (x - mean.detach()) ** 2
            bmean = x.mean(dim=p.axes, keepdim=True) if p.axes else x
            bvar = sq.mean(dim=p.axes, keepdim=True) if p.axes else sq
        elif p.axes:
            bvar, bmean = torch.var_mean(x, dim=p.axes, correction=0, keepdim=True)
        else:  # one element per slice: the mean is x itself and the variance identically 0
            bmean, bvar = x, x * 0.0
        mean = mean + (bmean - bmean.detach())
        var = var + (bvar - bvar.detach())
    y = scale * (x - mean) / torch.sqrt(var + p.epsilon) + bias
    gx, gs, gb = torch.autograd.grad(y, (x, scale, bias), grad_outputs=dy.expand_as(y))
    values = {p.output: gx, p.scale_gradient_output: gs, p.bias_gradient_output: gb}
    return values, f"autograd-{p.statistics}"


# --------------------------------------------------------------------------------------------
# Local response and Lp normalization: F.local_response_norm and F.normalize (or
# torch.linalg.vector_norm where Epsilon's placement differs from F.normalize's max(norm, eps))


def _lrn_torch_forward(p: dc.LocalResponsePlan, x: torch.Tensor) -> torch.Tensor:
    if len(p.axes) != 1 or p.axes[0] != 1:
        raise dc.Unsupported(
            "PyTorch has no local response normalization within a channel (CrossChannel FALSE)"
        )
    return F.local_response_norm(x, p.local_size, alpha=p.alpha, beta=p.beta, k=p.bias)


def _lrn_torch(p: Any, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """F.local_response_norm across channels. Its window for an even size reaches one channel
    further below (floor(n/2)) than the spec's (one further above): a documented difference
    (dmlconform/known_findings/torch.yaml)."""
    with torch.no_grad():
        return {p.output: _lrn_torch_forward(p, t(p.input))}, "local_response_norm"


def _lrn_grad_torch(p: Any, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """torch.autograd through F.local_response_norm (so its even-size window too)."""
    x, g = t(p.input), t(p.input_gradient)
    assert x is not None and g is not None
    x = x.clone().requires_grad_(True)
    (gx,) = torch.autograd.grad(_lrn_torch_forward(p, x), (x,), grad_outputs=g)
    return {p.output: gx}, "autograd-local_response_norm"


def _lp_torch(p: Any, t: Loader) -> tuple[dict[str, torch.Tensor], str]:
    """F.normalize where it computes the spec's formula (Epsilon 0: x / norm); otherwise x /
    sqrt(vector_norm^2 + Epsilon) (F.normalize's max(norm, eps) is another placement)."""
    if p.epsilon_placement != "squared_norm":
        raise dc.Unsupported(f"epsilon_placement {p.epsilon_placement!r} has no torch mapping")
    with torch.no_grad():
        x = t(p.input)
        assert x is not None
        # the normalized axis laid out innermost and contiguous, as a careful port lays out a
        # reduction: torch sums a strided outer axis sequentially, past the strict budget at 2^16
        rows = x.movedim(p.axes[0], -1).contiguous()
        if p.epsilon == 0:
            y = F.normalize(rows, p=float(p.p), dim=-1, eps=0.0)
            path = "normalize"
        else:
            norm = torch.linalg.vector_norm(rows, ord=p.p, dim=-1, keepdim=True)
            y, path = rows / torch.sqrt(norm * norm + p.epsilon), "vector_norm"
        return {p.output: y.movedim(-1, p.axes[0])}, path


def _other(compute: Callable[..., Any]) -> Callable[..., dict[str, np.ndarray]]:
    def lower(
        backend: TorchBackend, plan: dc.KernelPlan, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        return backend._execute_other(plan, inputs, compute)

    return lower


#: This backend's lowering of each kernel it maps (``plan.kernel``; dmlconform/kernels/).
LOWERINGS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    "normalization": TorchBackend._normalization,
    "rms_normalization": _other(_rms_torch),
    "given_statistics": _other(_given_torch),
    "normalization_grad": _other(_grad_torch),
    "local_response": _other(_lrn_torch),
    "local_response_grad": _other(_lrn_grad_torch),
    "lp_normalization": _other(_lp_torch),
}
