"""CI's property tests draw the same examples on every run (tests/conftest.py's "ci" profile,
which .ci/run selects), so that a red CI run is red again on a rerun; elsewhere they explore."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import HERE

# the suite's conftest, then one property test recording what it was given
PROGRAM = f"""
import importlib.util, json, sys
sys.path.insert(0, {HERE!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {os.path.join(HERE, "conftest.py")!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
from hypothesis import given, settings, strategies as st
seen = []

@settings(max_examples=25, database=None)
@given(st.integers(), st.floats(allow_nan=False))
def prop(i, f):
    seen.append([i, f])

prop()
print(json.dumps(seen))
"""


def drawn(**env: str) -> list:
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=clean | env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_ci_draws_the_same_examples_on_every_run() -> None:
    first = drawn(CI="true")
    assert len(first) >= 20
    assert drawn(CI="true") == first
    assert drawn(HYPOTHESIS_PROFILE="ci") == first
    # without it, each run explores afresh (two runs of 25 random draws do not coincide)
    assert drawn() != drawn()
