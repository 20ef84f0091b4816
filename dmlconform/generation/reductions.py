"""Legal descs whose reduction has a given number of elements (short and long reductions).

The numeric regimes that need them (biased vs unbiased variance over 1 or 2 elements,
accumulation error over 10^5) cannot wait for the legal generator to draw such a shape: the
input's root shape is set so, and the plan re-realized.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from dmlconform.generation.choices import DEFAULT_MAX_ELEMENTS, Options, draw_choices
from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.realize import realize
from dmlconform.kernels.base import input_member
from dmlconform.kernels.base import reduction_axes as kernel_reduction_axes
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules import Chooser
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.structure import Model
from dmlconform.specification.structure_builder import model_for


def reduction_axes(desc: OperatorDesc, spec: Spec) -> tuple[int, ...]:
    """The input axes the operator reduces over (a kernel plan's ``axes``, without the rest of
    the plan: any desc whose input and axes members are readable)."""
    return kernel_reduction_axes(desc, spec)


def reduction_size(desc: OperatorDesc, spec: Spec) -> int:
    inp = desc.members.get(input_member(spec.operator(desc.operator)) or "")
    if not isinstance(inp, TensorDesc):
        return 0
    return math.prod(inp.sizes[a] for a in reduction_axes(desc, spec))


def _build_with_reduction(
    model: Model, ch: Chooser, opts: Options, n: int, attempts: int = 50
) -> OperatorDesc:
    """A legal desc whose reduction covers exactly ``n`` input elements: the input's root shape
    is set to 1 on every reduced axis but one, which gets ``n``, and the plan is re-realized
    (broadcast partners follow their masks). Descs whose reduction moves are drawn again."""
    spec = model.spec
    input_name = input_member(model.op)
    if input_name not in model.size_group_of:
        raise ValueError(f"{model.op.name}: semantics.input names no tensor member")
    g_in = model.size_group_of[input_name]
    for _ in range(attempts):
        plan = draw_choices(model, ch, opts)
        if plan is None or g_in not in plan.shapes:
            continue
        desc = realize(model, plan, ch, Options(opts.dtype, opts.max_size, opts.max_elements, layouts=False))
        axes = reduction_axes(desc, spec)
        if not axes:
            continue
        base = list(plan.shapes[g_in])
        for a in ch.permutation(axes):
            shape = [
                1 if i in axes else (min(s, 2) if n > opts.max_elements // 8 else s)
                for i, s in enumerate(base)
            ]
            shape[a] = n
            while math.prod(shape) > opts.max_elements:  # few slices: halve the largest kept dim
                i = max((i for i in range(len(shape)) if i not in axes), key=lambda k: shape[k], default=None)
                if i is None or shape[i] == 1:
                    break
                shape[i] = max(1, shape[i] // 2)
            plan.shapes[g_in] = tuple(shape)
            desc = realize(model, plan, ch, opts)
            if reduction_size(desc, spec) == n:
                return desc
    raise RuntimeError(f"{model.op.name} at {model.level.name}: no desc with a reduction of {n} elements")


def reduction_descs(
    operator: str,
    level: str | FeatureLevel,
    n: int,
    seed: int = 0,
    count: int = 10,
    *,
    spec: Spec,
    dtype: str | None = None,
) -> Iterator[OperatorDesc]:
    """Legal descs whose reduction has exactly ``n`` elements (n = 1 or 2 for the short-reduction
    cases: biased vs unbiased variance, zero variance by construction)."""
    model = model_for(operator, level, spec)
    if not model.available:
        return
    opts = Options(dtype=dtype, max_elements=max(DEFAULT_MAX_ELEMENTS, 8 * n))
    ch = seeded_chooser(model.op.name, model.level.name, seed, "reduction", n)
    for _ in range(count):
        yield _build_with_reduction(model, ch, opts, n)


def long_reduction_desc(
    operator: str,
    level: str | FeatureLevel,
    dtype: str | None = None,
    n: int = 100_000,
    seed: int = 0,
    *,
    spec: Spec,
) -> OperatorDesc:
    """A legal desc whose reduction has ``n`` (default 10^5) elements and few reduction slices
    (other dims at most 2), for accumulation-error cases."""
    model = model_for(operator, level, spec)
    if not model.available:
        raise ValueError(f"{model.op.name} is not available at {model.level.name}")
    opts = Options(dtype=dtype, max_elements=8 * n)
    ch = seeded_chooser(model.op.name, model.level.name, seed, "long", n)
    return _build_with_reduction(model, ch, opts, n)
