"""The seeded driver of legal descs: the same sequence for the same arguments in any process.

It sits above the edge generator (``dmlconform.generation.edges``), which builds its variants
from the same legal descs, so that a share of the legal descs can be replaced by edges.
"""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.generation.choices import DEFAULT_MAX_ELEMENTS, DEFAULT_MAX_SIZE, Options
from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.edges import EdgeDrawer
from dmlconform.generation.realize import build_legal
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.structure_builder import model_for


def legal_descs(
    operator: str,
    level: str | FeatureLevel,
    seed: int = 0,
    count: int = 100,
    *,
    spec: Spec,
    dtype: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    edge_rate: float = 0.0,
) -> Iterator[OperatorDesc]:
    """``count`` descs legal at ``level``, the same sequence for the same arguments in any
    process. Keyed choices (dtype, rank, activation, presence, layouts...) cycle, so a handful of
    descs already spans the classes. Yields nothing below the operator's introduction level,
    where no desc is legal. ``edge_rate``: the share replaced by an edge of one of their rules
    (``dmlconform.generation.edges``; for descs that are only validated, never computed: an
    edge may carry a NaN Epsilon or 2^32 - 1 elements)."""
    model = model_for(operator, level, spec)
    if not model.available:
        return
    opts = Options(dtype=dtype, max_size=max_size, max_elements=max_elements)
    ch = seeded_chooser(model.op.name, model.level.name, seed, "legal")
    edge = EdgeDrawer(model, edge_rate)
    for _ in range(count):
        yield edge(build_legal(model, ch, opts), ch)
