"""Size tiers: which reduction lengths and tensor sizes a run adds to its seeded cases.

The seeded cases (``runner.cases.collect``) come from the legal generator, whose shapes stay small
(at most a few thousand elements), which says nothing about where GPU reductions change
algorithm: a warp (32), a workgroup (256, 1024), multi-pass reductions (4096, 65536), 2^24 (where
float32 stops counting exactly). A tier adds *size cases*: numeric cases whose reduction length
``n`` is chosen, built from the generator's plan machinery so that they are legal descs of any
operator (nothing here names one: the reduced axes come from the operator's semantics).

- ``smoke``: a first look: at most 2 seeded numeric and metamorphic cases per group, numeric
  cases at the selected level only, no size cases (validation cases, which cost no arithmetic,
  are kept whole). Every smoke case is a default case with the same id and data.
- ``default``: every seeded case unchanged (same ids, same data), plus per operator and data type
  reductions on both sides of 32, 256, 1024, 4096 and 65536 (two slices each, in the
  ``large_offset`` and ``standard_normal`` regimes) and one of 2^20 elements (``large_offset``:
  accumulation error grows with |mean|/std).
- ``stress``: ``default`` plus reductions of 2^20+1, 2^22 and 2^24+1 elements, 1-4 million
  elements per slice spread over several reduced axes (three slices: batch norm's channels),
  and a whole tensor of ``max_elements`` (64 slices), each in every regime that applies.

Size cases run at the selected feature level only (the level does not change the arithmetic),
and only those of at most ``max_elements`` input elements are collected. Whether a collected case
fits in this machine's memory is decided when it runs (:func:`memory_shortfall`): a case that does
not is skipped with the figure it needed, never left to crash the run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dmlconform import kernels
from dmlconform.generation.choices import DEFAULT_MAX_ELEMENTS, Choices, Options, draw_choices
from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.data import regime_desc, regimes_for
from dmlconform.generation.realize import realize
from dmlconform.generation.reductions import reduction_axes, reduction_size
from dmlconform.kernels.base import input_member
from dmlconform.runner import heap
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules import Chooser
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.structure import Model
from dmlconform.specification.structure_builder import model_for
from dmlconform.specification.validate import validate

THRESHOLDS: tuple[int, ...] = (32, 256, 1024, 4096, 65536)
"""Reduction lengths where GPU implementations typically change strategy (warp, workgroup,
multi-pass)."""

BOUNDARY_LENGTHS: tuple[int, ...] = tuple(t + d for t in THRESHOLDS for d in (-1, 1))


@dataclass(frozen=True)
class SizeFamily:
    """A group of size cases: one desc per reduction length, one case per regime.

    ``slices``: how many reduction slices the input holds (the product of its kept dims);
    ``min_axes``: spread ``n`` over at least this many reduced axes (descs whose operator reduces
    fewer are redrawn); ``regimes``: the regimes to run, None for every one that applies;
    ``whole``: the reduction length is ``max_elements // slices`` (a tensor as large as allowed);
    ``tag_slices``: the case id says ``n{n}x{slices}`` instead of ``n{n}``."""

    name: str
    lengths: tuple[int, ...] = ()
    slices: int = 1
    min_axes: int = 1
    regimes: tuple[str, ...] | None = None
    whole: bool = False
    tag_slices: bool = False

    def sizes(self, max_elements: int) -> list[int]:
        """The reduction lengths this family contributes under ``max_elements``."""
        if self.whole:
            n = max_elements // self.slices
            return [n] if n >= 2 else []
        return [n for n in self.lengths if n * self.slices <= max_elements]

    def label(self, n: int, slices: int | None = None) -> str:
        return f"n{n}x{slices or self.slices}" if self.tag_slices else f"n{n}"


@dataclass(frozen=True)
class Tier:
    """A tier: how many seeded cases to keep and which size families to add."""

    name: str
    description: str
    families: tuple[SizeFamily, ...]
    max_elements: int
    seeded_cases: int | None = None  # cap on --cases (smoke); None: as selected
    all_levels: bool = True  # seeded numeric cases at every level up to the selected one


#: exact_statistics in every size band: there the budget is the elementwise steps alone, so a
#: systematic error of a few ULP shows at any n (docs/verdicts.md)
_QUICK_REGIMES = ("large_offset", "standard_normal", "exact_statistics")

_DEFAULT_FAMILIES = (
    SizeFamily("boundary", BOUNDARY_LENGTHS, slices=2, regimes=_QUICK_REGIMES),
    SizeFamily("long", (2**20,), regimes=("large_offset", "exact_statistics")),
)

TIERS: dict[str, Tier] = {
    "smoke": Tier(
        "smoke",
        "2 numeric and metamorphic cases per group, numeric cases at the selected level only, no size cases",
        families=(),
        max_elements=2**16,
        seeded_cases=2,
        all_levels=False,
    ),
    "default": Tier(
        "default",
        "seeded cases plus reductions on both sides of 32, 256, 1024, 4096, 65536 and one of 2^20",
        families=_DEFAULT_FAMILIES,
        max_elements=2**22,
    ),
    "stress": Tier(
        "stress",
        "default plus 2^20+1, 2^22, 2^24+1 reductions, 1-4M elements per channel over several axes, "
        "a whole tensor of max_elements; every regime that applies",
        families=(
            *_DEFAULT_FAMILIES,
            SizeFamily("long-all-regimes", (2**20 + 1, 2**22, 2**24 + 1)),
            SizeFamily("channels", (2**20, 3 * 2**20, 2**22), slices=3, min_axes=2, tag_slices=True),
            SizeFamily("whole", slices=64, min_axes=2, whole=True, tag_slices=True),
        ),
        max_elements=2**26,
    ),
}
DEFAULT_TIER = "default"


def tier(name: str) -> Tier:
    """The tier called ``name``; ValueError (one line) for an unknown one."""
    try:
        return TIERS[name]
    except KeyError:
        raise ValueError(f"unknown tier {name!r} (known: {', '.join(TIERS)})") from None


def max_elements_for(name: str, max_elements: int | None) -> int:
    """The element cap in force: the one given, else the tier's default."""
    return int(max_elements) if max_elements else tier(name).max_elements


# --------------------------------------------------------------------------------------------
# Descs of a chosen size


def split_length(n: int, parts: int) -> list[int]:
    """``n`` as a product of ``parts`` factors, as balanced as its prime factors allow (largest
    first); a prime ``n`` stays on one axis."""
    factors = []
    m, p = n, 2
    while p * p <= m:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    if m > 1:
        factors.append(m)
    out = [1] * max(parts, 1)
    for f in sorted(factors, reverse=True):
        out[out.index(min(out))] *= f
    return sorted(out, reverse=True)


def _input_is_dense(desc: OperatorDesc, name: str) -> bool:
    """No zero stride on a dimension of size > 1: a broadcast main input would make every long
    slice a handful of repeated values, which is not the long reduction the case is for."""
    t = desc.members.get(name)
    if not isinstance(t, TensorDesc) or t.strides is None:
        return True
    return all(st != 0 or s == 1 for s, st in zip(t.sizes, t.strides, strict=False))


def sized_desc(
    operator: str,
    level: FeatureLevel,
    n: int,
    *,
    dtype: str | None = None,
    slices: int = 1,
    min_axes: int = 1,
    seed: int = 0,
    spec: Spec,
    attempts: int = 200,
) -> OperatorDesc:
    """A legal desc whose reduction has exactly ``n`` elements over ``slices`` slices.

    Like ``reductions.reduction_descs`` (which lets the other dims keep their drawn sizes, up to
    tens of slices), but with the shape fixed: the reduced axes get ``n`` (split over at least
    ``min_axes`` of them, largest factor first, when the operator reduces that many), one kept
    axis gets ``slices`` and every other dim is 1, so the element count is ``n * slices``.
    Everything else (optional members, activation, layouts, attributes) is drawn by the legal
    generator from a chooser seeded by the arguments, so the desc is the same in every process.
    Raises RuntimeError when no desc of that shape was found."""
    model = model_for(operator, level, spec)
    if not model.available:
        raise RuntimeError(f"{operator} is not available at {level.name}")
    input_name = input_member(model.op)
    g_in = model.size_group_of.get(input_name)
    opts = Options(dtype=dtype, max_elements=max(DEFAULT_MAX_ELEMENTS, n * slices))
    flat = Options(dtype, opts.max_size, opts.max_elements, layouts=False)
    ch = seeded_chooser(model.op.name, model.level.name, seed, "tier", n, slices, min_axes, dtype)
    for _ in range(attempts):
        plan = draw_choices(model, ch, opts)
        if plan is None or g_in not in plan.shapes:
            continue
        shape = _reduction_shape(model, plan, ch, flat, spec, g_in, (n, slices, min_axes))
        if shape is None:
            continue
        plan.shapes[g_in] = shape
        desc = realize(model, plan, ch, opts)
        inp = desc.members.get(input_name)
        if (
            isinstance(inp, TensorDesc)
            and inp.element_count == n * slices
            and reduction_size(desc, spec) == n
            and _input_is_dense(desc, input_name)
            and not validate(desc, level, spec)
        ):
            return desc
    raise RuntimeError(f"{operator} at {level.name}: no legal desc with {slices} slice(s) of {n} elements")


def _reduction_shape(
    model: Model,
    plan: Choices,
    ch: Chooser,
    flat: Options,
    spec: Spec,
    g_in: int | None,
    size: tuple[int, int, int],
) -> tuple[int, ...] | None:
    """The input's shape under ``plan`` for ``size`` = (n, slices, min_axes): ``n`` split over the
    reduced axes, ``slices`` on one kept axis, 1 elsewhere; None when the plan's operator reduces
    fewer than ``min_axes`` axes, or keeps none for the slices. Draws from ``ch`` in a fixed
    order, so that the desc is the same in every process."""
    n, slices, min_axes = size
    rank = len(plan.shapes[g_in])
    # With every dim 2, the reduced axes are the structural ones (a drawn 1 would pass for
    # a reduced dim of an operator that reduces where a partner tensor has size 1).
    plan.shapes[g_in] = (2,) * rank
    try:
        axes = reduction_axes(realize(model, plan, ch, flat), spec)
    except ValueError:
        return None
    kept = [i for i in range(rank) if i not in axes]
    if len(axes) < min_axes or (slices > 1 and not kept):
        return None
    shape = [1] * rank
    order = ch.permutation(axes)
    for axis, length in zip(order, split_length(n, len(axes) if min_axes > 1 else 1), strict=False):
        shape[axis] = length
    if slices > 1:
        shape[ch.choice(kept, key="tier:kept")] = slices
    return tuple(shape)


@dataclass(frozen=True)
class SizeCase:
    """One size case before it becomes a ``Case``: its id label, desc, regime and index."""

    label: str
    desc: OperatorDesc
    regime: str
    index: int


def size_cases(
    spec: Spec,
    operator: str,
    level: FeatureLevel,
    dtype: str,
    tier_name: str,
    max_elements: int | None,
    seed: int,
) -> Iterator[SizeCase]:
    """The tier's size cases of one operator and data type, in a fixed order (family, length,
    regime); the index is the regime's position among those the desc admits."""
    t = tier(tier_name)
    cap = max_elements_for(tier_name, max_elements)
    seen: set[str] = set()
    for family in t.families:
        for n in family.sizes(cap):
            found = _sized_or_simpler(spec, operator, level, dtype, n, family, seed)
            if found is None:
                continue
            desc, slices = found
            label = family.label(n, slices)
            if label in seen:  # two families asking for the same shape: the first one wins
                continue
            seen.add(label)
            regimes = [r for r in regimes_for(desc, spec) if family.regimes is None or r in family.regimes]
            for i, regime in enumerate(regimes):
                yield SizeCase(label, regime_desc(desc, regime, spec), regime, i)


def _sized_or_simpler(
    spec: Spec, operator: str, level: FeatureLevel, dtype: str, n: int, family: SizeFamily, seed: int
) -> tuple[OperatorDesc, int] | None:
    """The family's desc, or for an operator whose semantics do not allow that shape (a single
    reduced axis, no kept axis), the nearest simpler one: first on one axis, then one slice.
    None when not even that exists (the operator gets no case of this length)."""
    for slices, min_axes in dict.fromkeys(((family.slices, family.min_axes), (family.slices, 1), (1, 1))):
        try:
            return sized_desc(
                operator, level, n, dtype=dtype, slices=slices, min_axes=min_axes, seed=seed, spec=spec
            ), slices
        except RuntimeError:
            continue
    return None


# --------------------------------------------------------------------------------------------
# Memory


def bytes_per_element(desc: OperatorDesc, spec: Spec) -> int:
    """Peak resident bytes per input element of a numeric case of ``desc``: its kernel's measured
    figure (:attr:`dmlconform.kernels.Kernel.bytes_per_element`, from
    ``bench/bench_case_memory.py`` at 2^24 elements, where every tensor is its own mapping that
    free returns; at 2^22 and below glibc keeps freed tensors in its heap and the figure
    measures the allocator). Per kernel because they differ by 4x: the compiled judge's models
    need few bytes beyond the tensors (the MVN family 17-61), the numpy models of the LRN family
    up to 159. A desc whose kernel is unknown gets the largest figure."""
    try:
        return kernels.kernel_of(desc, spec).bytes_per_element
    except (kernels.UnknownKernel, KeyError):
        return max(k.bytes_per_element for k in kernels.KERNELS.values())


MEMORY_MARGIN = 0.9
"""Use at most this share of the memory available when the case starts."""

MEMORY_LIMIT_ENV = "DMLCONFORM_MEMORY_LIMIT"
"""Environment variable: bytes a case may use (suffixes K, M, G accepted), instead of what
/proc/meminfo and the cgroup say."""


def case_bytes(desc: OperatorDesc, spec: Spec) -> int:
    """Estimated peak memory (bytes) of running ``desc`` as a numeric case."""
    inp = desc.members.get(input_member(spec.operator(desc.operator)) or "")
    if not isinstance(inp, TensorDesc):
        return 0
    return bytes_per_element(desc, spec) * inp.element_count


def _parse_bytes(text: str) -> int | None:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if mult > 1 else text) * mult)
    except ValueError:
        return None


def _meminfo_available(path: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """What a cgroup v2 memory limit leaves (a container's limit, which MemAvailable ignores)."""
    try:
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((root / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Bytes a case may use now: ``$DMLCONFORM_MEMORY_LIMIT`` if set, else the smaller of
    MemAvailable and the cgroup's headroom, plus the free memory this process's heap keeps for
    reuse (:mod:`dmlconform.runner.heap`, which both count as used); None when unknown (then
    nothing is skipped)."""
    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env:
        return _parse_bytes(env)
    known = [v for v in (_meminfo_available(), _cgroup_available()) if v is not None]
    return min(known) + heap.retained_free_bytes() if known else None


def _gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB" if b >= 2**28 else f"{b / 2**20:.0f} MiB"


def memory_shortfall(desc: OperatorDesc, spec: Spec) -> str | None:
    """None when the case fits in memory, else the one-line skip message with the figures."""
    need = case_bytes(desc, spec)
    if need < 2**26:  # small cases never ask (reading /proc per case costs more than they do)
        return None
    avail = available_memory()
    if avail is None or need <= MEMORY_MARGIN * avail:
        return None
    inp = desc.members.get(input_member(spec.operator(desc.operator)) or "")
    count = inp.element_count if isinstance(inp, TensorDesc) else 0
    return (
        f"does not fit in memory: needs about {_gib(need)} ({count:,} input elements x "
        f"{bytes_per_element(desc, spec)} bytes), {_gib(avail)} available"
        f"{' (' + MEMORY_LIMIT_ENV + ')' if os.environ.get(MEMORY_LIMIT_ENV) else ''}; "
        "lower --max-elements or free memory"
    )


def elements_and_length(desc: OperatorDesc, spec: Spec) -> tuple[int | None, int | None]:
    """(input element count, reduction length) of a desc, None where it has no meaning (an
    illegal desc without the members the semantics need)."""
    try:
        inp = desc.members.get(input_member(spec.operator(desc.operator)) or "")
        elements = inp.element_count if isinstance(inp, TensorDesc) else None
        n = reduction_size(desc, spec) if elements is not None else None
    except (ValueError, KeyError, TypeError, IndexError):
        return None, None
    return elements, n


def sizes_summary(max_elements: int) -> str:
    """Human text of a cap: 67,108,864 (2^26)."""
    e = math.log2(max_elements) if max_elements > 0 else 0
    return f"{max_elements:,}" + (f" (2^{int(e)})" if e == int(e) else "")
