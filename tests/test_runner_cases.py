"""Collection of a run's cases (dmlconform/runner/cases.py)."""

from __future__ import annotations

import pytest

from dmlconform import data
from dmlconform.runner.cases import Selection, apply_when, collect
from dmlconform.spec import load_spec


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_metamorphic_regimes_apply_to_the_desc_the_relation_starts_from(seed: int) -> None:
    """A relation's ``when`` changes the desc (CrossChannel TRUE reduces over more dims), so the
    data regime must be drawn for that desc. One picked for the generated desc (``short_reduction``)
    made 1-3 metamorphic cases of most ``--cases 24`` runs skip as "does not apply"."""
    spec = load_spec()
    cases = list(collect(spec, Selection(level="6_4", cases=24, seed=seed, kinds=("metamorphic",))))
    assert cases
    forced = [c for c in cases if c.relation.when]
    assert forced, "no relation with a precondition was collected"
    for case in cases:
        base = apply_when(case.desc, case.relation)
        assert case.regime in data.regimes_for(base), case.id
        data.make_inputs(base, case.regime, case.input_seed)  # raises RegimeNotApplicable otherwise
