"""Sharded runs (`run --shard K/N`) and `report merge`: the shards partition the run, and the merged
report is the unsharded run's report apart from timing and host fields; merges of reports that
cannot be one run's are refused with one line and exit 2."""

from __future__ import annotations

import copy
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import dmlconform
from hypothesis import given
from hypothesis import strategies as st

from dmlconform.cli import main
from dmlconform.report.merge import unsharded_command
from dmlconform.runner.cases import Selection, Shard, collect, in_shard
from dmlconform.specification.spec import load_spec

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

# Small and fast, with failing cases (so reproducer directories are merged too): the numeric and
# metamorphic cases of a backend that is wrong on FLOAT16, at one low level.
SELECTION = [
    "--backend", "test_plugin_backends:WrongValues", "--operators", "MEAN_VARIANCE_NORMALIZATION1",
    "--feature-level", "2_1", "--cases", "2", "--max-elements", "5000", "--kinds", "numeric", "metamorphic", "validation",
]  # fmt: skip
TIMING = ("started", "finished", "duration_s", "merged_from")


def test_shard_parse() -> None:
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard.parse(" 1/1 ")) == "1/1"
    for bad in ("0/4", "5/4", "4", "a/b", "1/0", "-1/2", ""):
        with pytest.raises(ValueError, match="K/N"):
            Shard.parse(bad)


@given(st.integers(0, 200), st.integers(1, 9))
def test_shards_partition_and_balance_by_count(n_items: int, count: int) -> None:
    items = [f"case-{i}" for i in range(n_items)]
    shards = [list(in_shard(iter(items), Shard(k, count))) for k in range(1, count + 1)]
    flat = [x for s in shards for x in s]
    assert sorted(flat) == sorted(items) and len(flat) == len(set(flat))
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    for s in shards:  # each shard keeps the collection order
        assert s == sorted(s, key=items.index)


def test_shards_of_a_real_collection_are_stable_and_spread_every_group() -> None:
    spec = load_spec()
    sel = Selection(level=spec.level("6_4"), cases=4)
    ids = [c.id for c in collect(spec, sel)]
    again = [[c.id for c in in_shard(collect(spec, sel), Shard(k, 3))] for k in (1, 2, 3)]
    assert sorted(sum(again, [])) == sorted(ids)
    assert again == [[c.id for c in in_shard(collect(spec, sel), Shard(k, 3))] for k in (1, 2, 3)]
    # Every operator appears in every shard (round-robin deals each group over all shards).
    for shard in again:
        assert {i.split("[")[1].split("-")[0] for i in shard} == {i.split("[")[1].split("-")[0] for i in ids}


def test_unsharded_command() -> None:
    assert unsharded_command("dmlconform run --backend numpy --shard 2/4 --cases 3") == (
        "dmlconform run --backend numpy --cases 3"
    )
    assert (
        unsharded_command("pytest --dml-backend=numpy --dml-shard=1/2 -q") == "pytest --dml-backend=numpy -q"
    )
    assert unsharded_command("pytest --dml-shard 1/2 --dml-backend numpy") == "pytest --dml-backend numpy"


def _normalized_results(report: Path) -> dict[str, Any]:
    data = json.loads((report / "results.json").read_text())
    for key in TIMING:
        data.pop(key, None)
    for case in data["cases"]:
        case.pop("duration_s")
        if case["replay"]:
            case["replay"] = case["replay"].replace(str(report.resolve()), "REPORT")
    return data


def _junit_cases(report: Path) -> list[tuple[str, str, list[tuple[str, str | None]]]]:
    suite = ET.parse(report / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    home = str(report.resolve())  # failure texts end with a replay command into the report
    cases = [
        (
            tc.get("classname") or "",
            tc.get("name") or "",
            [(ch.tag, (ch.get("message") or "").replace(home, "REPORT") or None) for ch in tc],
        )
        for tc in suite
        if tc.tag == "testcase"
    ]
    return [("counts", json.dumps(counts), []), *cases]


def _page(report: Path) -> str:
    html = (report / "index.html").read_text()
    html = html.replace(str(report.resolve()), "REPORT")
    # Timing and generation stamps are the only differences allowed.
    html = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "TIME", html)
    return re.sub(r"\(([\d.]+) s\)", "(N s)", html)


def test_four_shards_merged_equal_the_unsharded_run(tmp_path: Path) -> None:
    whole = dmlconform("run", *SELECTION, "--report", "whole", cwd=tmp_path)
    assert whole.returncode == 1, whole.stdout[-2000:] + whole.stderr[-2000:]
    for k in range(1, 5):
        part = dmlconform("run", *SELECTION, "--shard", f"{k}/4", "--report", f"s{k}", cwd=tmp_path)
        assert part.returncode in (0, 1), part.stdout[-2000:] + part.stderr[-2000:]
        data = json.loads((tmp_path / f"s{k}" / "results.json").read_text())
        assert data["shard"] == {"index": k, "count": 4} and data["complete"] is True
    merged = dmlconform("report", "merge", "s3", "s1", "s4", "s2", "--out", "merged", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    a, b = tmp_path / "whole", tmp_path / "merged"
    ra, rb = _normalized_results(a), _normalized_results(b)
    assert ra["summary"]["failed"] > 0 and ra["summary"]["passed"] > 0
    assert ra["collected"] == rb["collected"] == ra["summary"]["total"] == len(rb["cases"])
    assert ra == rb
    shard_sizes = [json.loads((tmp_path / f"s{k}" / "results.json").read_text())["ran"] for k in range(1, 5)]
    assert sum(shard_sizes) == ra["ran"] and max(shard_sizes) - min(shard_sizes) <= 1
    assert _junit_cases(a) == _junit_cases(b)
    assert (a / "summary.md").read_text() == (b / "summary.md").read_text()
    assert _page(a) == _page(b)
    # Reproducers: the same directories, the same files; case.json differs only in the replay path.
    fa = sorted(p.name for p in (a / "failures").iterdir())
    assert fa and fa == sorted(p.name for p in (b / "failures").iterdir())
    for name in fa:
        for file in ("desc.yaml", "inputs.npz"):
            assert (a / "failures" / name / file).read_bytes() == (b / "failures" / name / file).read_bytes()
        ca = json.loads((a / "failures" / name / "case.json").read_text())
        cb = json.loads((b / "failures" / name / "case.json").read_text())
        assert cb["replay"].split()[2] == str((b / "failures" / name).resolve())
        for c, root in ((ca, a), (cb, b)):
            c["replay"] = c["replay"].replace(str(root.resolve()), "REPORT")
            c.pop("duration_s", None)
        assert ca == cb
    # The merged replay command works from the merged directory.
    replay = json.loads((b / "results.json").read_text())
    failing = next(c for c in replay["cases"] if c["outcome"] == "failed")
    again = dmlconform(*failing["replay"].split()[1:], cwd=tmp_path)
    assert again.returncode == 1, again.stderr


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    """Two synthetic shard reports of one run (the synthetic document split round-robin)."""
    from synthetic_results import make_results

    doc = make_results(40, seed=5)
    doc.update(
        complete=True, status="complete", stop_reason=None, exit_status=1, collected=None, ran=None,
        selection={"level": "6_4", "cases": 8, "seed": 0}, spec_hash="abc",
    )  # fmt: skip
    doc["cases"] = [dict(c, reproducer=None, replay=None) for c in doc["cases"]]
    out = []
    for k in (1, 2):
        part = copy.deepcopy(doc)
        part["cases"] = doc["cases"][k - 1 :: 2]
        part["collected"] = part["ran"] = len(part["cases"])
        part["shard"] = {"index": k, "count": 2}
        directory = tmp_path / f"s{k}"
        directory.mkdir()
        (directory / "results.json").write_text(json.dumps(part))
        out.append(directory)
    return out


def _edit(report: Path, **changes: Any) -> None:
    data = json.loads((report / "results.json").read_text())
    data.update(changes)
    (report / "results.json").write_text(json.dumps(data))


def _merge(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["report", "merge", *map(str, args)])
    err = capsys.readouterr().err
    return code, err


def test_merge_of_synthetic_shards(
    shards: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _merge(capsys, *shards, "--out", tmp_path / "m")
    assert code == 0, err
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert merged["complete"] is True and merged["shard"] is None
    assert merged["collected"] == merged["ran"] == 40 == merged["summary"]["total"]
    assert [p["shard"] for p in merged["merged_from"]] == ["1/2", "2/2"]
    # Merging again into the same directory replaces the earlier merge.
    assert _merge(capsys, *shards, "--out", tmp_path / "m")[0] == 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", 7, "seed is"),
        ("backend", {"name": "other", "options": {}}, "backend.name is"),
        ("spec_hash", "def", "spec_hash is"),
        ("tool", {"name": "dmlconform", "version": "9.9"}, "tool.version is"),
        ("selection", {"level": "6_4", "cases": 8, "seed": 0, "tier": "smoke"}, "selection.tier is"),
        ("tier", "stress", "tier is"),  # a field added later is compared without a change to merge
    ],
)
def test_merge_refuses_different_settings(
    shards: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Any,
    message: str,
) -> None:
    _edit(shards[1], **{field: value})
    code, err = _merge(capsys, *shards, "--out", tmp_path / "m")
    assert code == 2 and message in err and "different runs" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "m").exists()


def test_merge_refuses_missing_duplicate_and_overlapping(
    shards: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _merge(capsys, shards[0], "--out", tmp_path / "m")
    assert code == 2 and "missing shard(s) 2/2 of 2" in err
    code, err = _merge(capsys, shards[0], shards[0], "--out", tmp_path / "m")
    assert code == 2 and "shard 1/2 given twice" in err
    other = tmp_path / "other"
    shutil.copytree(shards[1], other)
    code, err = _merge(capsys, *shards, other, "--out", tmp_path / "m")
    assert code == 2 and "shard 2/2 given twice" in err
    _edit(other, shard={"index": 1, "count": 3})
    code, err = _merge(capsys, shards[0], other, "--out", tmp_path / "m")
    assert code == 2 and "different shardings" in err
    first = json.loads((shards[0] / "results.json").read_text())["cases"][0]
    data = json.loads((shards[1] / "results.json").read_text())
    data["cases"].append(first)
    (shards[1] / "results.json").write_text(json.dumps(data))
    code, err = _merge(capsys, *shards, "--out", tmp_path / "m")
    assert code == 2 and f"case {first['id']} is in both" in err
    assert all(len(e.strip().splitlines()) == 1 for e in [err])


def test_merge_refuses_incomplete_unless_allowed(
    shards: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(
        shards[1],
        complete=False,
        status="interrupted",
        stop_reason="interrupted (Ctrl-C / SIGINT)",
        collected=99,
    )
    code, err = _merge(capsys, *shards, "--out", tmp_path / "m")
    assert code == 2 and "incomplete report" in err and "interrupted (Ctrl-C / SIGINT)" in err
    assert "--allow-incomplete" in err and "of 99 cases ran" in err
    code, err = _merge(capsys, *shards, "--out", tmp_path / "m", "--allow-incomplete")
    assert code == 0, err
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert merged["complete"] is False and "shard 2/2" in merged["stop_reason"]
    assert "INCOMPLETE RUN" in (tmp_path / "m" / "summary.md").read_text().splitlines()[0]
    # A missing shard is accepted the same way, and the merged collection size is then unknown.
    shutil.rmtree(tmp_path / "m")
    code, err = _merge(capsys, shards[0], "--out", tmp_path / "m", "--allow-incomplete")
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert code == 0 and merged["collected"] is None and "2/2 missing" in merged["stop_reason"]


def test_merge_usage_errors(shards: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _merge(capsys, *shards)[0] == 2  # no --out
    code, err = _merge(capsys, *shards, "--out", shards[0])
    assert code == 2 and "is one of the reports being merged" in err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    code, err = _merge(capsys, *shards, "--out", busy)
    assert code == 2 and "not empty" in err and (busy / "notes.txt").exists()


def test_a_shard_under_xdist_runs_the_same_cases_and_is_complete(tmp_path: Path) -> None:
    serial = dmlconform("run", *SELECTION, "--shard", "2/3", "--report", "s", cwd=tmp_path)
    parallel = dmlconform("run", *SELECTION, "--shard", "2/3", "--report", "p", "--", "-n", "2", cwd=tmp_path)
    assert serial.returncode == parallel.returncode == 1, parallel.stdout[-2000:] + parallel.stderr[-2000:]
    a = json.loads((tmp_path / "s" / "results.json").read_text())
    b = json.loads((tmp_path / "p" / "results.json").read_text())
    assert [c["id"] for c in a["cases"]] == [c["id"] for c in b["cases"]]
    assert b["complete"] is True and b["collected"] == a["collected"] == len(b["cases"])


def test_bad_shard_is_a_one_line_usage_error(tmp_path: Path) -> None:
    proc = dmlconform("run", "--backend", "reference", "--shard", "5/4", cwd=tmp_path)
    assert proc.returncode == 2 and "--shard expects K/N" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
