"""results.json's text: what the file holds is what :func:`jsonable` makes of the results, read
back alike whichever way each case was written, one case a line."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmlconform.report.results_file import jsonable, results_text, write_results_file

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))
from synthetic_results import make_results  # noqa: E402

#: what a backend's info or a record may hold: JSON's types, numpy scalars and arrays, tuples,
#: non-finite floats, and objects JSON has no word for
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.floats(width=32).map(np.float32)
    | st.integers(-(2**31), 2**31 - 1).map(np.int64)
    | st.lists(st.floats(width=32), max_size=3).map(lambda v: np.array(v, np.float32))
    | st.just(Path("/x"))
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5) | st.integers(0, 9), inner, max_size=3)
    ),
    max_leaves=12,
)


def same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (jsonable writes it as the string 'nan' anyway)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@given(st.dictionaries(st.text(max_size=6), VALUES, max_size=4), st.lists(VALUES, max_size=4))
def test_the_text_reads_back_as_jsonable_makes_the_results(fields, cases) -> None:  # type: ignore[no-untyped-def]
    results = {**fields, "cases": cases}
    text = results_text(results)
    assert same(json.loads(text), jsonable(results))
    json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))  # no NaN literal


def test_a_run_file_has_one_case_a_line_and_reads_back(tmp_path: Path) -> None:
    results = make_results(300, 0, failure_rate=0.2)
    results["cases"][5]["errors"] = {"worst": {"abs": math.nan, "budget_abs": np.float32(math.inf)}}
    path = write_results_file(tmp_path, results)
    assert same(json.loads(path.read_text()), jsonable(results))
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith('  {"id": ')]
    assert len(starts) == 300 and starts == list(range(starts[0], starts[0] + 300))
    assert json.loads(lines[starts[5]].rstrip(","))["errors"]["worst"] == {"abs": "nan", "budget_abs": "inf"}
    assert not list(tmp_path.glob("*.tmp"))
