"""DirectML's shipped known findings bound its FLOAT16 results instead of masking them: DirectML's
own answers pass under them, and a planted FLOAT16 regression (outputs times 1 + 2^-6, or one
NaN per output) fails its FLOAT16 numeric cases under the same file, in the same run.

Needs the stack ``dmlconform directml setup`` installs; without it the module is skipped with the
one line ``stack.locate()`` gives. The damaged backend below delegates to the directml backend
and keeps its name, so the run applies the findings shipped for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from helpers import dmlconform

from dmlconform.backends.directml.stack import StackMissing, locate

try:
    locate()
except StackMissing as exc:
    pytest.skip(str(exc), allow_module_level=True)

from dmlconform.backends.directml.backend import DirectMLBackend  # noqa: E402

pytestmark = pytest.mark.slow

#: FLOAT16 cases of an operator that computes statistics (F1's bound), of one whose squared norm
#: F10 names by the data (LP: 6 of DirectML's own answers are F10's), and of one that is given
#: them (FLOAT16 arithmetic); the seed-0 default-tier cases (``--cases 2``: the first two of each
#: group of eight)
SELECTION = ["--operators", "MVN1", "LP", "BN", "--dtypes", "FLOAT16", "--kinds", "numeric", "--cases", "2"]


class PartlyDamagedFloat16(DirectMLBackend):
    """DirectML with a planted FLOAT16 regression in a third of the cases each: one NaN in every
    FLOAT16 output, or every element scaled by 1 + 2^-6 (16 FLOAT16 ULP); the other third is
    DirectML's own answer. Which by :func:`damage_of`. One run for the three: the stack starts
    once (most of a run's time)."""

    name: ClassVar[str] = "directml"

    def execute(self, desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        plant = PLANTS[damage_of(desc.members["InputTensor"].sizes)]
        return {
            k: plant(v) if isinstance(v, np.ndarray) and v.dtype == np.float16 and v.size else v
            for k, v in super().execute(desc, inputs).items()
        }


def damage_of(input_sizes: list[int]) -> str:
    """The damage a case gets, from its input's sizes (seed 0: 58, 63 and 61 cases)."""
    return ("none", "nan", "scaled")[sum(input_sizes) % 3]


def _scaled(v: np.ndarray) -> np.ndarray:
    return (v.astype(np.float32) * np.float32(1 + 2**-6)).astype(np.float16)


def _nan_planted(v: np.ndarray) -> np.ndarray:
    out = v.copy()
    out.reshape(-1)[out.size // 2] = np.nan
    return out


PLANTS = {"none": lambda v: v, "nan": _nan_planted, "scaled": _scaled}


def test_directml_passes_under_its_findings_and_a_planted_float16_regression_fails(tmp_path: Path) -> None:
    report = tmp_path / "r"
    done = dmlconform(
        "run", "--backend", "test_directml_findings:PartlyDamagedFloat16", *SELECTION, "--report", str(report),
        cwd=tmp_path,
    )  # fmt: skip
    assert (report / "results.json").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    cases = json.loads((report / "results.json").read_text())["cases"]
    by_damage: dict[str, list[dict[str, Any]]] = {"none": [], "nan": [], "scaled": []}
    for c in cases:
        by_damage[damage_of(c["desc"]["desc"]["InputTensor"]["Sizes"])].append(c)
    assert done.returncode == 1 and all(by_damage.values()), {k: len(v) for k, v in by_damage.items()}
    # DirectML's own answers: no failure, and FLOAT16 failures its findings explain, by name
    own = by_damage["none"]
    assert [c["id"] for c in own if c["outcome"] in ("failed", "error")] == []
    assert any(c["known_finding"] == "F1" for c in own)
    assert any(c["known_finding"] == "F10" for c in own)  # named by the data of the case
    for damage in ("nan", "scaled"):
        damaged = by_damage[damage]
        failed = [c for c in damaged if c["outcome"] == "failed"]
        # every case a bound judges fails; only the cases a ``fails`` finding covers (F10's, by
        # their data: beyond every bound on this stack) stay known
        assert len(failed) >= len(damaged) // 2, (damage, [c["outcome"] for c in damaged])
        assert any("outside F1's bound" in (c["message"] or "") for c in failed), damage
    # no bound admits a NaN: only the cases of a ``fails`` finding stay known
    nan = by_damage["nan"]
    assert [c["id"] for c in nan if c["outcome"] == "xfailed" and "within" in (c["message"] or "")] == []
