"""The suite file and its cases' pytest node ids: where a pasted case id points, and how the
console prints one.

A failure's id must paste back from wherever it was printed (the console, results.json,
junit.xml), and the console must print the bare id a user pastes, not the path of the suite file
inside the installed package. ``dmlconform run`` points its extra arguments at the suite before
pytest starts (:func:`suite_argument`), so this module stays light: no pytest at import.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

SUITE_DIR = Path(__file__).resolve().parent.parent / "suite"
SUITE_FILE = SUITE_DIR / "test_conformance.py"

_CASE_ID = re.compile(r"^(numeric|validation|metamorphic)\[[^\]]+\]$")


def suite_argument(arg: str) -> str:
    """A test argument as the suite file's pytest node id, so that a failure's id pastes back
    from wherever it was printed: a bare case id (``validation[...]``), ``::validation[...]``,
    or ``<any path to>test_conformance.py::...`` (the console shows it relative to the directory
    of the run, results.json relative to the suite). Other arguments are left alone."""
    if _CASE_ID.match(arg):
        return f"{SUITE_FILE}::{arg}"
    path, sep, rest = arg.partition("::")
    if sep and _CASE_ID.match(rest) and (not path or Path(path).name == SUITE_FILE.name):
        return f"{SUITE_FILE}::{rest}"
    return arg


def case_operator(nodeid: str) -> str | None:
    """The operator of a conformance case's node id (``...::numeric[OP-LEVEL-...]``)."""
    name = nodeid.rpartition("::")[2]
    if not _CASE_ID.match(name):
        return None
    return name[name.index("[") + 1 :].split("-", 1)[0]


def show_case_ids(config: pytest.Config) -> None:
    """Print a case as ``numeric[...]`` where pytest prints a node id relative to the current
    directory (the short summary's ``FAILED`` lines, ``-v``'s lines), not as the path of the suite
    file inside the installed package (``../venv/lib/python3.11/site-packages/dmlconform/suite/
    test_conformance.py::...``): the bare id is what a user pastes back (:func:`suite_argument`
    points it at the suite). pytest has no hook for that text; it asks the config's
    ``cwd_relative_nodeid``, so this config's method is wrapped. Node ids other than the suite's
    cases (a plain pytest run's own tests beside them) pass through unchanged, and so does what
    pytest stores (``--lf``'s cache, junit.xml, results.json keep the real node id)."""
    import dataclasses

    original = config.cwd_relative_nodeid
    root = config.rootpath

    def cwd_relative_nodeid(nodeid: Any) -> Any:
        path, sep, name = str(nodeid).partition("::")
        # (the suite file outside the rootdir, as under plain pytest in a project, has path "")
        if not (sep and _CASE_ID.match(name) and (not path or (root / path).resolve() == SUITE_FILE)):
            return original(nodeid)
        if isinstance(nodeid, str):  # pytest before 9.2 passes the id as a string
            return name
        return dataclasses.replace(nodeid, path=name, names=(), params=None)

    config.cwd_relative_nodeid = cwd_relative_nodeid  # type: ignore[method-assign]
