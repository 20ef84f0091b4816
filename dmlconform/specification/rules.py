"""The closed vocabulary of rule kinds.

Every rule in the spec names one of these kinds; the kind knows how to check a desc against the
rule's parameters (and, in ``dmlconform.generation.descs``, how to satisfy and break it). Nothing here
names an operator: a new operator is YAML that reuses these kinds, and a new *kind* of constraint
is one new class here plus its enum entry in ``spec/schema``.

A check yields ``(member_path, message)`` pairs; the validator turns them into Violations with the
rule's id and source. Checks see a :class:`Context` that already knows which tensors are unusable
(missing, or not a valid DML_BUFFER_TENSOR_DESC), so that one mistake is reported once, by the
rule that names it, and not again by every rule that reads the same tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dmlconform.specification.desc import (
    ActivationDesc,
    OperatorDesc,
    TensorDesc,
    element_span,
    minimum_implied_size_in_bytes,
)
from dmlconform.specification.model import FeatureLevel, Operator, Rule, Spec, SupportRow

Finding = tuple[str, str]


@dataclass
class Context:
    spec: Spec
    op: Operator
    level: FeatureLevel
    desc: OperatorDesc
    row: SupportRow
    unusable: set[str] = field(default_factory=set)

    def tensor(self, name: str) -> TensorDesc | None:
        """The member's tensor desc if it is present and usable, else None."""
        if name in self.unusable:
            return None
        value = self.desc.members.get(name)
        return value if isinstance(value, TensorDesc) else None

    def present(self, name: str) -> bool:
        return self.desc.members.get(name) is not None

    def value(self, name: str) -> Any:
        return self.desc.get(name, self.spec)

    def struct_order(self, names: list[str]) -> list[str]:
        order = {m.name: i for i, m in enumerate(self.op.members)}
        return sorted(names, key=lambda n: order.get(n, len(order)))


class RuleKind:
    """One kind of constraint. ``params`` are the rule parameters the spec must give."""

    name: ClassVar[str]
    params: ClassVar[tuple[str, ...]] = ()
    scope: ClassVar[str] = "operator"

    #: Whether a legal desc can sit at this kind's boundary (coverage, ``at_edge``). Kinds that
    #: only demand presence or equality (required members, same sizes, a supported data type)
    #: have no edge: every legal desc satisfies them the same way, so only an illegal desc, one
    #: that breaks the rule, exercises them.
    has_edge: ClassVar[bool] = False

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """Whether the legal desc in ``ctx`` depends on this rule: a value the rule reads sits at
        the limit of what it allows (a range's end, a minimum, the level something arrives at) or
        uses a permission the rule grants (a broadcast dimension, a non-zero alignment). An
        implementation that got the rule wrong meets such a desc; the coverage table counts it
        as exercising the rule, and no other legal desc."""
        return False

    def members(self, rule: Rule) -> list[str]:
        """Members the rule binds (for spec lint and spec-diff)."""
        out = list(rule.params.get("members", []))
        for key in ("member", "to", "of", "length_member"):
            if key in rule.params:
                out.append(rule.params[key])
        return out


KINDS: dict[str, RuleKind] = {}


def kind(cls: type[RuleKind]) -> type[RuleKind]:
    KINDS[cls.name] = cls()
    return cls


def _sizes(t: TensorDesc) -> str:
    return "{" + ", ".join(map(str, t.sizes)) + "}"


# --------------------------------------------------------------------------------------------
# Operator-level kinds


@kind
class Available(RuleKind):
    name = "available"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        intro = ctx.spec.level(ctx.op.introduced)
        if ctx.level.index < intro.index:
            yield (
                "type",
                f"{ctx.op.name} was introduced in DML_FEATURE_LEVEL_{intro.name}, "
                f"not available at {ctx.level.name}",
            )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """At the level the operator arrives at."""
        return ctx.level.index == ctx.spec.level(ctx.op.introduced).index


@kind
class Required(RuleKind):
    name = "required"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name in rule.params["members"]:
            if ctx.value(name) is None:
                state = "null" if name in ctx.desc.members else "missing"
                yield name, f"{name} is required but {state}"


@kind
class SupportDimensionCount(RuleKind):
    name = "support_dimension_count"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.rank not in support.dimension_counts:
                yield (
                    f"{name}.DimensionCount",
                    f"{name} has {t.rank} dimensions; supported at {ctx.level.name}: "
                    f"{_counts(support.dimension_counts)} (support row 'DML_FEATURE_LEVEL_{ctx.row.since} and above')",
                )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """A tensor with the fewest or the most dimensions its support row admits."""
        return any(
            (t := ctx.tensor(name)) is not None
            and support.dimension_counts
            and t.rank in (min(support.dimension_counts), max(support.dimension_counts))
            for name, support in ctx.row.tensors.items()
        )


def _counts(counts: tuple[int, ...]) -> str:
    if len(counts) > 2 and list(counts) == list(range(counts[0], counts[-1] + 1)):
        return f"{counts[0]} to {counts[-1]}"
    return ", ".join(map(str, counts))


@kind
class SupportDataType(RuleKind):
    name = "support_data_type"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.data_type not in support.data_types:
                yield (
                    f"{name}.DataType",
                    f"{name} is {t.data_type}; supported: {', '.join(support.data_types)}",
                )


class _SameField(RuleKind):
    """Every present member of the group agrees with the first one in struct order."""

    params = ("members",)
    field_name: ClassVar[str]
    label: ClassVar[str]

    def get(self, t: TensorDesc) -> Any:
        raise NotImplementedError

    def show(self, value: Any) -> str:
        return str(value)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        present = [n for n in ctx.struct_order(rule.params["members"]) if ctx.tensor(n) is not None]
        if len(present) < 2:
            return
        anchor = present[0]
        want = self.get(ctx.tensor(anchor))  # type: ignore[arg-type]
        for name in present[1:]:
            got = self.get(ctx.tensor(name))  # type: ignore[arg-type]
            if got != want:
                yield (
                    f"{name}.{self.field_name}",
                    f"{name} {self.label} {self.show(got)} differs from {anchor}'s {self.show(want)}",
                )


@kind
class SameSizes(_SameField):
    name = "same_sizes"
    field_name = "Sizes"
    label = "Sizes"

    def get(self, t: TensorDesc) -> Any:
        return t.sizes

    def show(self, value: Any) -> str:
        return "{" + ", ".join(map(str, value)) + "}"


@kind
class SameDataType(_SameField):
    name = "same_data_type"
    field_name = "DataType"
    label = "DataType"

    def get(self, t: TensorDesc) -> Any:
        return t.data_type


@kind
class SameDimensionCount(_SameField):
    name = "same_dimension_count"
    field_name = "DimensionCount"
    label = "DimensionCount"

    def get(self, t: TensorDesc) -> Any:
        return t.rank


@kind
class Broadcastable(RuleKind):
    """Each dimension of ``member`` is 1 or equal to ``to``'s; ``fixed_dims`` (Python-style
    indices, negative from the end; ``fixed_dims_by_rank`` adds dims for one rank: which dimension
    is "the channel" depends on the rank) must be equal, and only while every attribute named in
    ``fixed_when`` has the given value (a doc sentence such as "Spatial FALSE requires Width and
    Height not to be broadcast"). Tensors of different rank are left to the dimension-count
    rules."""

    name = "broadcastable"
    params = ("member", "to")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """The desc broadcasts: a dimension of 1 against a larger one, or, while ``fixed_when``
        holds, a fixed dimension larger than 1 (one that could have been broadcast otherwise)."""
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return False
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, len(t.sizes))
        return any(
            (i in fixed and b > 1) or (i not in fixed and a == 1 < b)
            for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False))
        )

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return
        rank = len(t.sizes)
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, rank)
        for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False)):
            if a == b:
                continue
            if i in fixed:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a} but must equal {rule.params['to']}'s {b} at {ctx.level.name}",
                )
            elif a != 1:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a}: must be 1 or {rule.params['to']}'s {b}",
                )


def fixed_dims(params: dict[str, Any], rank: int) -> frozenset[int]:
    """The dimensions a ``broadcastable`` rule fixes on a tensor of ``rank``: ``fixed_dims`` (any
    rank, negative from the end) plus the ``fixed_dims_by_rank`` entry for that rank."""
    dims = list(params.get("fixed_dims", ()))
    for entry in params.get("fixed_dims_by_rank", ()):
        if entry["rank"] == rank:
            dims += entry["dims"]
    return frozenset(d % rank for d in dims if -rank <= d < rank)


def condition_holds(when: dict[str, Any] | None, value: Any) -> bool:
    """Whether every member named in ``when`` has the given value (``value(name)`` reads a
    member, defaults applied; BOOL members compare as truth values). No condition holds always;
    an absent member does not satisfy one."""
    for name, want in (when or {}).items():
        got = value(name)
        if got is None:
            return False
        if isinstance(want, bool) or isinstance(got, bool):
            if bool(got) != bool(want):
                return False
        elif got != want:
            return False
    return True


@kind
class PairedPresence(RuleKind):
    name = "paired_presence"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        names = rule.params["members"]
        present = [n for n in names if ctx.present(n)]
        if present and len(present) != len(names):
            for n in names:
                if n not in present:
                    yield (
                        n,
                        f"{n} is required when {' and '.join(present)} is present"
                        + (f" below DML_FEATURE_LEVEL_{rule.until}" if rule.until else ""),
                    )


@kind
class ArrayLength(RuleKind):
    name = "array_length"
    params = ("member", "length_member")

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        arr, count = ctx.value(rule.params["member"]), ctx.value(rule.params["length_member"])
        if arr is None or count is None:
            return
        if count != len(arr):
            yield (
                rule.params["length_member"],
                f"{rule.params['length_member']} is {count} but {rule.params['member']} has {len(arr)} entries",
            )


@kind
class AxesInRange(RuleKind):
    name = "axes_in_range"
    params = ("member", "of")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """An axis is the last dimension of the tensor."""
        axes, t = ctx.value(rule.params["member"]), ctx.tensor(rule.params["of"])
        if isinstance(axes, int):
            axes = (axes,)
        return axes is not None and t is not None and t.rank - 1 in tuple(axes)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        axes, t = ctx.value(rule.params["member"]), ctx.tensor(rule.params["of"])
        if axes is None or t is None:
            return
        if isinstance(axes, int):  # a single UINT axis (LP's Axis): the member itself is the path
            if axes >= t.rank:
                yield (
                    rule.params["member"],
                    f"axis {axes} is out of range for {rule.params['of']} of {t.rank} dimensions",
                )
            return
        for i, a in enumerate(axes):
            if a >= t.rank:
                yield (
                    f"{rule.params['member']}[{i}]",
                    f"axis {a} is out of range for {rule.params['of']} of {t.rank} dimensions",
                )


@kind
class AxesUnique(RuleKind):
    name = "axes_unique"
    params = ("member",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        axes = ctx.value(rule.params["member"])
        if axes is None:
            return
        seen: dict[int, int] = {}
        for i, a in enumerate(axes):
            if a in seen:
                yield f"{rule.params['member']}[{i}]", f"axis {a} repeats {rule.params['member']}[{seen[a]}]"
            else:
                seen[a] = i


# --------------------------------------------------------------------------------------------
# Tensor-desc kinds: checked for every tensor member; ``check_tensor`` sees one tensor.


class TensorKind(RuleKind):
    scope = "tensor"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:  # pragma: no cover - unused
        raise NotImplementedError("tensor kinds are checked per tensor by the validator")

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        return any(
            (t := ctx.tensor(m.name)) is not None and self.tensor_at_edge(rule, m.name, t, ctx)
            for m in ctx.op.tensor_members
        )

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """``at_edge`` for one tensor of the desc (any tensor at the edge puts the desc there)."""
        return False


@kind
class TensorDimensionCountRange(TensorKind):
    name = "tensor_dimension_count_range"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        top = ctx.level.max_dimension_count
        if not 1 <= t.rank <= top:
            yield (
                f"{name}.DimensionCount",
                f"DimensionCount {t.rank} is outside 1 to {top} (the maximum at {ctx.level.name})",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        return t.rank in (1, ctx.level.max_dimension_count)


@kind
class TensorSizesCount(TensorKind):
    name = "tensor_sizes_count"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.dimension_count is not None and t.dimension_count != len(t.sizes):
            yield (
                f"{name}.Sizes",
                f"Sizes has {len(t.sizes)} entries but DimensionCount is {t.dimension_count}",
            )


@kind
class TensorSizesPositive(TensorKind):
    name = "tensor_sizes_positive"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        for i, s in enumerate(t.sizes):
            if s < 1:
                yield f"{name}.Sizes[{i}]", f"size {s} is less than 1"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        return 1 in t.sizes


@kind
class TensorStridesCount(TensorKind):
    name = "tensor_strides_count"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.strides is not None and len(t.strides) != t.rank:
            yield f"{name}.Strides", f"Strides has {len(t.strides)} entries for {t.rank} dimensions"


@kind
class TensorElementCountMax(TensorKind):
    name = "tensor_element_count_max"
    params = ("max",)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        count = math.prod(t.sizes)
        if count > rule.params["max"]:
            yield f"{name}.Sizes", f"{count} elements exceed the maximum {rule.params['max']}"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """Within a factor of two of the maximum."""
        return 2 * math.prod(t.sizes) > rule.params["max"]


@kind
class TensorTotalSize(TensorKind):
    name = "tensor_total_size"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.total_tensor_size_in_bytes is None or len(t.effective_strides) != len(t.sizes):
            return  # omitted: DirectML's helper computes the minimum
        dtype = ctx.spec.data_types[t.data_type]
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, dtype.size)
        if t.total_tensor_size_in_bytes < need:
            yield (
                f"{name}.TotalTensorSizeInBytes",
                f"TotalTensorSizeInBytes {t.total_tensor_size_in_bytes} is below the minimum implied size {need}",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """A stated TotalTensorSizeInBytes exactly at the minimum (an omitted one is not read)."""
        if t.total_tensor_size_in_bytes is None or len(t.effective_strides) != len(t.sizes):
            return False
        size = ctx.spec.data_types[t.data_type].size
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, size)
        return t.total_tensor_size_in_bytes == need


@kind
class TensorTotalSizeMax(TensorKind):
    """TotalTensorSizeInBytes at most ``max`` elements' worth: the buffer's element count, a
    partial last element included, fits DirectML's 32-bit element indices."""

    name = "tensor_total_size_max"
    params = ("max",)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        size = ctx.spec.data_types[t.data_type].size
        if size <= 0 or len(t.effective_strides) != len(t.sizes):
            return
        top = int(int(rule.params["max"]) * size)
        limit = f"{top} ({rule.params['max']} elements of {size:g} bytes)"
        total = t.total_tensor_size_in_bytes
        if total is not None:
            if total > top:
                yield f"{name}.TotalTensorSizeInBytes", f"TotalTensorSizeInBytes {total} exceeds {limit}"
            return
        # omitted: DirectML takes the minimum implied size (DMLCalcBufferTensorSize), rounded up to 4
        implied = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, size)
        if implied > top:
            where = f"{name}.Strides" if t.strides is not None else f"{name}.Sizes"
            yield (
                where,
                f"the minimum implied size {implied} (TotalTensorSizeInBytes omitted) exceeds {limit}",
            )


@kind
class TensorAlignment(TensorKind):
    """GuaranteedBaseOffsetAlignment: 0, or a power of two at least ``minimum`` bytes and the
    element size."""

    name = "tensor_alignment"
    params = ("minimum",)

    @staticmethod
    def least(rule: Rule, t: TensorDesc, ctx: Context) -> int:
        """The least legal non-zero alignment: ``minimum`` or the element size (rounded up to a
        power of two), whichever is larger."""
        size = ctx.spec.data_types[t.data_type].size
        return max(int(rule.params["minimum"]), 1 << max(math.ceil(math.log2(size)), 0) if size > 0 else 1)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        a = t.guaranteed_base_offset_alignment
        if not a:
            return
        least = self.least(rule, t, ctx)
        if a & (a - 1) or a < least:
            yield (
                f"{name}.GuaranteedBaseOffsetAlignment",
                f"GuaranteedBaseOffsetAlignment {a} must be 0 or a power of two >= {least}",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An alignment at its least legal value: an implementation that assumes more alignment
        than the desc guarantees meets it."""
        a = t.guaranteed_base_offset_alignment
        return bool(a) and a == self.least(rule, t, ctx)


@kind
class TensorFlags(TensorKind):
    name = "tensor_flags"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        member = ctx.op.member(name)
        for flag in ctx.spec.tensor_flags:
            if (
                flag.name == t.effective_flags
                and flag.inputs_only
                and member is not None
                and member.kind != "input"
            ):
                yield f"{name}.Flags", f"flag {flag.name} is allowed on input tensors only"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An inputs-only flag on an input: the permission the rule grants, in use."""
        member = ctx.op.member(name)
        if member is None or member.kind != "input":
            return False
        return any(f.name == t.effective_flags and f.inputs_only for f in ctx.spec.tensor_flags)


@kind
class TensorOutputSpan(TensorKind):
    """An output spans at least as many element slots as it has elements (IndexOfLastElement + 1
    >= the element count): fewer slots than elements means two elements share one, which
    DirectML refuses. An output that overlaps within a larger span passes, as DirectML lets it."""

    name = "tensor_output_span"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        member = ctx.op.member(name)
        if member is None or member.kind != "output" or len(t.effective_strides) != len(t.sizes):
            return
        count, span = math.prod(t.sizes), element_span(t.sizes, t.effective_strides)
        if count > span:
            yield (
                f"{name}.Strides",
                f"the output's {count} elements lie within {span} element slots (IndexOfLastElement + 1): "
                "an output's elements may not share one",
            )


# --------------------------------------------------------------------------------------------
# Activation kinds: checked for every member of type ``activation``.


class ActivationKind(RuleKind):
    scope = "activation"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for m in ctx.op.members:
            value = ctx.desc.members.get(m.name)
            if m.type == "activation" and isinstance(value, ActivationDesc):
                yield from self.check_activation(rule, m.name, value, ctx)

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        return any(
            m.type == "activation"
            and isinstance(a := ctx.desc.members.get(m.name), ActivationDesc)
            and self.activation_at_edge(rule, a, ctx)
            for m in ctx.op.members
        )

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """``at_edge`` for one fused activation of the desc."""
        return False


@kind
class ActivationFusable(ActivationKind):
    name = "activation_fusable"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        if a.type not in ctx.spec.activations:
            yield f"{name}.Type", f"{a.type} is not a fusable activation"


@kind
class ActivationAvailable(ActivationKind):
    name = "activation_available"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        act = ctx.spec.activations.get(a.type)
        if act is not None and ctx.level.index < ctx.spec.level(act.since).index:
            yield (
                f"{name}.Type",
                f"{a.type} is fusable from DML_FEATURE_LEVEL_{act.since}, not at {ctx.level.name}",
            )

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """An activation at the level it becomes fusable."""
        act = ctx.spec.activations.get(a.type)
        return act is not None and ctx.level.index == ctx.spec.level(act.since).index


@kind
class ActivationTensorsNull(ActivationKind):
    name = "activation_tensors_null"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        for field_name, t in (("InputTensor", a.input_tensor), ("OutputTensor", a.output_tensor)):
            if t is not None:
                yield f"{name}.{field_name}", f"a fused activation's {field_name} must be null"


@kind
class ActivationParameterRequired(ActivationKind):
    name = "activation_parameter_required"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        act = ctx.spec.activations.get(a.type)
        if act is None:
            return
        given = a.param_dict
        for p in act.parameters:
            if p.name not in given and p.default is None:
                yield f"{name}.{p.name}", f"{a.type} needs {p.name} (it has no default)"


@kind
class ActivationParameterMin(ActivationKind):
    name = "activation_parameter_min"
    params = ("activation", "parameter", "min")

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        if a.type != rule.params["activation"]:
            return
        act = ctx.spec.activations[a.type]
        p = rule.params["parameter"]
        default = next((x.default for x in act.parameters if x.name == p), None)
        value = a.param_dict.get(p, default)
        if value is not None and not value >= rule.params["min"]:
            until = f" before {rule.until}" if rule.until else ""
            yield f"{name}.{p}", f"{a.type} {p} {value:g} must be >= {rule.params['min']:g}{until}"

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """The parameter (given or defaulted) exactly at its minimum."""
        if a.type != rule.params["activation"]:
            return False
        p = rule.params["parameter"]
        act = ctx.spec.activations[a.type]
        default = next((x.default for x in act.parameters if x.name == p), None)
        return a.param_dict.get(p, default) == rule.params["min"]


# --------------------------------------------------------------------------------------------
# Scalar attribute kinds: a number member's legal values.


@kind
class AttributeRange(RuleKind):
    """A UINT or FLOAT member within ``[min, max]`` (``max`` optional): LocalSize "must be at
    least 1". A legal desc at ``min`` or ``max`` sits at the edge."""

    name = "attribute_range"
    params = ("member", "min")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        value = ctx.value(rule.params["member"])
        ends = (rule.params.get("min"), rule.params.get("max"))
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value in ends

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        low, high = rule.params.get("min"), rule.params.get("max")
        if low is not None and value < low:
            yield name, f"{name} is {value}, below its minimum {low}"
        elif high is not None and value > high:
            yield name, f"{name} is {value}, above its maximum {high}"


@kind
class AttributeOneOf(RuleKind):
    """A UINT member that takes one of a few listed values: P "either 1 or 2"."""

    name = "attribute_one_of"
    params = ("member", "values")

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if value is None:
            return
        allowed = list(rule.params["values"])
        if value not in allowed:
            yield name, f"{name} is {value}, not one of {allowed}"
