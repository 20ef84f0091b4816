"""Size tiers (dmlconform/runner/tiers.py): which cases each tier collects, the size cases' descs,
the memory skip, and the tier and accuracy figures in results.json and the reports."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlconform.backends import load_backend
from dmlconform.generation import data
from dmlconform.generation.reductions import reduction_axes, reduction_size
from dmlconform.report import load_results, render_html, render_markdown
from dmlconform.report.accuracy_by_size import build_bands
from dmlconform.runner import tiers
from dmlconform.runner.cases import Case, Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate
from dmlconform.tolerance.options import NO_OPTIONS

REPO = Path(__file__).resolve().parent.parent
LEVEL = load_spec().level("6_4")
SEEDED_NUMERIC_ID = re.compile(r"^numeric\[[A-Z0-9_]+-\d_\d-[A-Z0-9]+-\d{4}\]$")


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def _collect(spec, **kw) -> list[Case]:
    return list(collect(spec, Selection(level=kw.pop("level", LEVEL), **kw)))


def _key(c: Case) -> tuple:
    return (c.id, json.dumps(c.desc.to_dict(), sort_keys=True), c.regime, c.input_seed)


@pytest.fixture(scope="module")
def default_cases(spec) -> list[Case]:
    return _collect(spec, cases=8)


@pytest.fixture(scope="module")
def stress_cases(spec) -> list[Case]:
    return [c for c in _collect(spec, cases=1, tier="stress", kinds=("numeric",)) if c.size]


# ------------------------------------------------------------------------------------------
# Selection


def test_default_tier_keeps_every_seeded_case(spec, default_cases, monkeypatch) -> None:
    """With the size families removed, collection is what it was before tiers: the default tier
    adds cases and changes none (same ids, descs, regimes, input seeds), so expectation files
    and report diffs from earlier runs stay valid."""
    no_sizes = dataclasses.replace(tiers.TIERS["default"], families=())
    monkeypatch.setitem(tiers.TIERS, "default", no_sizes)
    before = [_key(c) for c in _collect(spec, cases=8)]
    seeded = [_key(c) for c in default_cases if c.size is None]
    assert seeded == before
    assert all(SEEDED_NUMERIC_ID.match(k[0]) for k in before if k[0].startswith("numeric["))
    added = [c for c in default_cases if c.size is not None]
    assert added and all(c.kind == "numeric" and not SEEDED_NUMERIC_ID.match(c.id) for c in added)
    assert len({c.id for c in default_cases}) == len(default_cases)


def test_smoke_is_a_subset_of_default(spec, default_cases) -> None:
    smoke = _collect(spec, cases=8, tier="smoke")
    by_id = {c.id: _key(c) for c in default_cases}
    assert smoke and len(smoke) < len(default_cases) / 5
    assert all(c.size is None for c in smoke)
    assert all(by_id.get(c.id) == _key(c) for c in smoke)
    assert {c.level for c in smoke if c.kind == "numeric"} == {LEVEL}
    assert max(c.index for c in smoke if c.kind == "numeric") == 1


def test_collection_is_the_same_in_another_process(spec) -> None:
    """xdist workers and sharded runs must collect the same items with the same data."""
    code = (
        "import hashlib, json\n"
        "from dmlconform.runner.cases import Selection, collect\n"
        "from dmlconform.specification.spec import load_spec\n"
        "s = load_spec()\n"
        "cs = collect(s, Selection(level=s.level('6_4'), cases=1, tier='stress', kinds=('numeric',)))\n"
        "h = hashlib.sha256()\n"
        "for c in cs:\n"
        "    h.update(json.dumps([c.id, c.desc.to_dict(), c.regime, c.input_seed], sort_keys=True).encode())\n"
        "print(h.hexdigest())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import hashlib

    h = hashlib.sha256()
    for c in _collect(spec, cases=1, tier="stress", kinds=("numeric",)):
        h.update(json.dumps([c.id, c.desc.to_dict(), c.regime, c.input_seed], sort_keys=True).encode())
    assert out.stdout.strip() == h.hexdigest()


def _lengths(cases: list[Case]) -> dict[tuple[str, str], set[int]]:
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for c in cases:
        if c.size is not None:
            out[(c.operator, c.data_type)].add(reduction_size(c.desc, SPEC))
    return out


def test_boundary_lengths_on_both_sides_of_each_threshold(spec, default_cases) -> None:
    lengths = _lengths(default_cases)
    groups = {(op, dt) for op in spec.operators for dt in ("FLOAT32", "FLOAT16")}
    assert set(lengths) == groups
    for group, ns in lengths.items():
        for t in (32, 256, 1024, 4096, 65536):
            assert {t - 1, t + 1} <= ns, (group, t)
        assert max(ns) >= 2**20, group  # one long reduction in the default tier


def test_size_case_ids_name_the_length(default_cases) -> None:
    for c in default_cases:
        if c.size is not None:
            n = reduction_size(c.desc, SPEC)
            assert c.id == f"numeric[{c.operator}-{LEVEL}-{c.data_type}-{c.size}-{c.index:04d}]"
            assert c.size.startswith(f"n{n}")
    assert "numeric[MEAN_VARIANCE_NORMALIZATION1-6_4-FLOAT32-n65537-0001]" in {c.id for c in default_cases}


def test_stress_sizes_and_regimes(spec, stress_cases) -> None:
    lengths = _lengths(stress_cases)
    for group, ns in lengths.items():
        assert {2**20 + 1, 2**22, 2**24 + 1} <= ns, group
    by_desc: dict[str, set[str]] = defaultdict(set)
    descs = {}
    for c in stress_cases:
        key = f"{c.operator}-{c.data_type}-{c.size}"
        by_desc[key].add(c.regime)
        if c.regime != "exact_statistics":  # its case runs the desc without the activation
            descs[key] = c.desc
    # every regime that applies, for the stress-only families
    for key, regs in by_desc.items():
        n = reduction_size(descs[key], spec)
        if n > 2**20 or "x" in key.rsplit("-", 1)[-1]:
            assert regs == set(data.regimes_for(descs[key], spec)), key
            assert "large_offset" in regs and "long_reduction" in regs
            assert ("fp16_square_overflow" in regs) == ("FLOAT16" in key)


def _single_axis(spec, operator: str) -> bool:
    """The operator reduces along one axis member of type uint (LP_NORMALIZATION's Axis)."""
    op = spec.operator(operator)
    member = (op.semantics.get("reduce_axes") or {}).get("member")
    return member is not None and any(m.name == member and m.type == "uint" for m in op.members)


def test_several_reduced_axes_and_whole_tensors(spec, stress_cases) -> None:
    per_channel, whole = [], []
    for c in stress_cases:
        inp = c.desc.members["InputTensor"]
        axes = reduction_axes(c.desc, spec)
        n = reduction_size(c.desc, spec)
        if c.size and c.size.endswith("x3"):
            per_channel.append(c)
            assert 10**6 <= n <= 4 * 2**20
            if not _single_axis(spec, c.operator):  # spread over several axes where the desc can
                assert sum(1 for a in axes if inp.sizes[a] > 1) >= 2, c.id
            assert inp.element_count == 3 * n
        if c.size and c.size.endswith("x64"):
            whole.append(c)
            assert inp.element_count == 2**26
    ops = {c.operator for c in per_channel}
    assert ops == set(spec.operators) and {c.operator for c in whole} == ops


def test_max_elements_caps_size_cases(spec) -> None:
    cases = _collect(spec, cases=1, tier="stress", kinds=("numeric",), max_elements=2**21)
    sized = [c for c in cases if c.size]
    assert sized
    assert max(c.desc.members["InputTensor"].element_count for c in sized) <= 2**21
    assert any(c.size.endswith("x64") for c in sized)  # the whole tensor follows the cap
    assert not any(reduction_size(c.desc, spec) > 2**21 for c in sized)


def test_unknown_tier_is_one_line(spec) -> None:
    with pytest.raises(ValueError, match=r"unknown tier 'huge' \(known: smoke, default, stress\)"):
        _collect(spec, tier="huge")


# ------------------------------------------------------------------------------------------
# Size descs


@pytest.mark.parametrize(
    "op", ["BATCH_NORMALIZATION_TRAINING", "MEAN_VARIANCE_NORMALIZATION", "MEAN_VARIANCE_NORMALIZATION1"]
)
@pytest.mark.parametrize(
    ("n", "slices", "min_axes"), [(31, 2, 1), (4097, 1, 1), (3 * 2**20, 3, 2), (2**16 + 1, 4, 2)]
)
def test_sized_desc_is_legal_with_the_asked_shape(spec, op: str, n: int, slices: int, min_axes: int) -> None:
    desc = tiers.sized_desc(
        op, LEVEL, n, dtype="FLOAT16", slices=slices, min_axes=min_axes, seed=5, spec=spec
    )
    assert validate(desc, LEVEL, spec) == []
    inp = desc.members["InputTensor"]
    assert inp.data_type == "FLOAT16"
    assert reduction_size(desc, spec) == n
    assert inp.element_count == n * slices
    if min_axes > 1 and n % 2 == 0:
        assert sum(1 for a in reduction_axes(desc, spec) if inp.sizes[a] > 1) >= 2
    again = tiers.sized_desc(
        op, LEVEL, n, dtype="FLOAT16", slices=slices, min_axes=min_axes, seed=5, spec=spec
    )
    assert again == desc


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**7), st.integers(1, 6))
def test_split_length(n: int, parts: int) -> None:
    out = tiers.split_length(n, parts)
    assert len(out) == parts and math.prod(out) == n and out == sorted(out, reverse=True)


# ------------------------------------------------------------------------------------------
# Memory


def _size_case(spec, n: int) -> Case:
    desc = tiers.sized_desc("MEAN_VARIANCE_NORMALIZATION1", LEVEL, n, dtype="FLOAT32", spec=spec)
    return Case("numeric", desc.operator, LEVEL, "FLOAT32", 0, desc, 0, "large_offset", size=f"n{n}")


def test_case_that_does_not_fit_is_skipped_with_the_figures(spec, monkeypatch) -> None:
    monkeypatch.setenv(tiers.MEMORY_LIMIT_ENV, "16M")
    case = _size_case(spec, 2**20)  # needs 80 MiB (80 bytes per element)
    result = run_case(case, ThreadGuard(load_backend("reference", {}), None), spec, NO_OPTIONS)
    assert result.status == "skipped"
    need = tiers.bytes_per_element(case.desc, spec) * 2**20
    assert need == 80 * 2**20  # the normalization kernel's measured figure
    assert f"needs about {need / 2**20:.0f} MiB" in result.message
    assert "1,048,576 input elements x 80 bytes" in result.message and "16 MiB available" in result.message
    # with room it runs
    monkeypatch.setenv(tiers.MEMORY_LIMIT_ENV, "64G")
    assert (
        run_case(case, ThreadGuard(load_backend("reference", {}), None), spec, NO_OPTIONS).status == "passed"
    )


def test_the_memory_estimate_is_the_kernels_measured_figure(spec) -> None:
    """Each kernel's own figure (bench/bench_case_memory.py): the numpy-judged LRN gradient
    needs 2.5x what a compiled-judge MVN1 does, so one global figure would refuse MVN1 cases
    that fit or admit LRN_GRAD cases that do not."""
    mvn1 = tiers.sized_desc("MEAN_VARIANCE_NORMALIZATION1", LEVEL, 2**20, dtype="FLOAT32", spec=spec)
    lrn_grad = tiers.sized_desc("LOCAL_RESPONSE_NORMALIZATION_GRAD", LEVEL, 2**20, dtype="FLOAT32", spec=spec)
    assert tiers.case_bytes(mvn1, spec) == 80 * 2**20
    assert tiers.case_bytes(lrn_grad, spec) == 200 * 2**20


def test_memory_sources(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable:  2048 kB\n")
    assert tiers._meminfo_available(tmp_path / "meminfo") == 2048 * 1024
    (tmp_path / "memory.max").write_text("max\n")
    assert tiers._cgroup_available(tmp_path) is None
    (tmp_path / "memory.max").write_text("1000000\n")
    (tmp_path / "memory.current").write_text("400000\n")
    assert tiers._cgroup_available(tmp_path) == 600000
    assert tiers._parse_bytes("1.5G") == 3 * 2**29 and tiers._parse_bytes("4096") == 4096
    monkeypatch.setenv(tiers.MEMORY_LIMIT_ENV, "2M")
    assert tiers.available_memory() == 2 * 2**20


def test_small_cases_never_read_memory(spec, monkeypatch) -> None:
    def boom() -> int:
        raise AssertionError("asked for memory")

    monkeypatch.setattr(tiers, "available_memory", boom)
    assert tiers.memory_shortfall(_size_case(spec, 1025).desc, spec) is None


# ------------------------------------------------------------------------------------------
# A run: results.json and the reports


def test_tier_run_records_and_reports(tmp_path: Path) -> None:
    report = tmp_path / "r"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["--operators", "MEAN_VARIANCE_NORMALIZATION1", "--dtypes", "FLOAT32", "--feature-level", "2_1"]
    args += ["--kinds", "numeric", "--cases", "1", "--tier", "default", "--max-elements", "9000"]
    proc = subprocess.run(
        [sys.executable, "-m", "dmlconform.cli", "run", "--backend", "numpy", *args, "--report", str(report)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((report / "results.json").read_text())
    assert results["tier"] == "default" and results["max_elements"] == 9000
    assert "--tier default --max-elements 9000" in results["command"]
    sized = [c for c in results["cases"] if re.search(r"-n\d+-\d{4}\]$", c["id"])]
    # boundary lengths up to 4097 (two slices: 8194 elements <= 9000), two regimes each
    assert sorted({c["reduction_length"] for c in sized}) == [31, 33, 255, 257, 1023, 1025, 4095, 4097]
    assert len(sized) == 24  # eight lengths x three regimes (large_offset, standard_normal, exact_statistics)
    assert all(c["elements"] == 2 * c["reduction_length"] for c in sized)
    seeded = [c for c in results["cases"] if c not in sized]
    assert all(
        isinstance(c["reduction_length"], int) and c["elements"] >= c["reduction_length"] for c in seeded
    )

    html = (report / "index.html").read_text()
    assert '<td id="run-tier">default, size cases up to 9,000 input elements</td>' in html
    chart = re.search(r'<svg class="accuracy".*?</svg>', html, re.S)
    assert chart, "no accuracy chart"
    points = re.findall(r'data-n="(\d+)" data-ratio="([^"]+)" data-case="([^"]+)"', chart.group(0))
    # one point per log2 bin of n (the worst case in it): both sides of each power of two
    bins = {math.ceil(math.log2(int(n))) for n, _, _ in points}
    assert bins >= {math.ceil(math.log2(n)) for n in (31, 33, 255, 257, 1023, 1025, 4095, 4097)}
    by_id = {c["id"]: c for c in results["cases"]}
    for n, ratio, case in points:
        assert by_id[case]["reduction_length"] == int(n)
        assert 0 <= float(ratio) <= 1  # a passing run: every point under the line
    assert 'id="accuracy-limit"' in chart.group(0)
    md = (report / "summary.md").read_text()
    assert "tier default" in md and "### Accuracy" in md


def _record(i: int, n: int, ratio: float | None, outcome: str = "passed", **errors) -> dict:
    errs = {"max_ulp": 3.0, "max_abs": 1e-6, "budget_ulp": 8.0, "outputs": {"OutputTensor": {}}, **errors}
    if ratio is not None:
        errs["ratio"] = ratio
    return {
        "id": f"numeric[OP-6_4-FLOAT32-n{n}-{i:04d}]",
        "kind": "numeric",
        "operator": "OP",
        "feature_level": "6_4",
        "data_type": "FLOAT32",
        "outcome": outcome,
        "reduction_length": n,
        "elements": n,
        "errors": errs,
    }


def test_report_reads_ratio_and_aggregates(tmp_path: Path) -> None:
    """Records that carry ``errors.ratio`` and per-output ``aggregate`` figures (the tolerance
    model's): bands, chart points and failure details show them; > 1 is marked."""
    agg = {
        "OutputTensor": {
            "max_ulp": 3.0,
            "max_abs": 1e-6,
            "ratio": 2.5,
            "aggregate": {"shift": 0.2, "scale": 3.5, "residual": 0.01},
        }
    }
    cases = [
        _record(0, 31, 0.25),
        _record(1, 33, 0.5),
        _record(2, 5000, 0.125),
        _record(3, 2**20 + 1, 2.5, "failed", outputs=agg),
        _record(4, 2**22, None),  # no ratio: falls back to the ULP figures (3 / 8)
    ]
    (tmp_path / "results.json").write_text(
        json.dumps({"schema_version": 1, "tier": "stress", "max_elements": 2**26, "cases": cases})
    )
    results = load_results(tmp_path)
    bands = build_bands(results)
    cells = bands["rows"][0]["cells"]
    assert [cells[b]["ratio"] if cells[b] else None for b in bands["bands"]] == [0.5, 0.125, None, 2.5]
    assert cells[bands["bands"][3]]["over"] == 1 and cells[bands["bands"][3]]["count"] == 2
    failing = results.cases[3]
    assert (
        failing.aggregate == {"shift": 0.2, "scale": 3.5, "residual": 0.01} and failing.aggregate_ratio == 3.5
    )
    html = render_html(results)
    assert "stress, size cases up to 67,108,864 input elements" in html
    points = dict(re.findall(r'data-n="(\d+)" data-ratio="([^"]+)"', html))
    assert points == {"31": "0.25", "33": "0.5", "5000": "0.125", "1048577": "2.5", "4194304": "0.375"}
    assert "scale 3.5" in html and "<th>scale / bound</th>" in html
    md = render_markdown(results)
    assert "| OP | FLOAT32 | 0.5 | 0.125 | - | **2.5** |" in md


def test_shape_an_operator_cannot_take_falls_back_to_a_simpler_one(spec, monkeypatch) -> None:
    """An operator that reduces a single axis, or keeps none, still gets its long reductions:
    on one axis, then in one slice, labelled with the slices it really has."""
    real = tiers.sized_desc

    def single_axis_single_slice(*args, **kw):
        if kw.get("min_axes", 1) > 1 or kw.get("slices", 1) > 1:
            raise RuntimeError("no such desc")
        return real(*args, **kw)

    monkeypatch.setattr(tiers, "sized_desc", single_axis_single_slice)
    cases = list(tiers.size_cases(spec, "MEAN_VARIANCE_NORMALIZATION1", LEVEL, "FLOAT32", "stress", 2**22, 0))
    labels = {c.label for c in cases}
    assert {"n31", "n4194304", "n1048576x1", "n65536x1"} <= labels
    assert not any(label.endswith(("x3", "x64")) for label in labels)
    for c in cases:
        assert c.desc.members["InputTensor"].element_count == reduction_size(c.desc, spec)


def _op_record(op: str, dt: str, i: int, n: int, ratio: float, outcome: str = "passed") -> dict:
    rec = _record(i, n, ratio, outcome)
    rec.update(id=f"numeric[{op}-6_4-{dt}-n{n}-{i:04d}]", operator=op, data_type=dt)
    return rec


def test_accuracy_chart_of_a_failing_run_keeps_the_limit_readable(tmp_path: Path) -> None:
    """Ratios of 1e46 and inf go to a band above a break; the main axis ends at 1e3, so the line
    at 1 keeps its place instead of being squashed to the bottom."""
    from dmlconform.report.accuracy_by_size import build_accuracy

    cases = [
        _op_record("OP_A", "FLOAT32", 0, 31, 0.25),
        _op_record("OP_A", "FLOAT32", 1, 1025, 4.2e46, "failed"),
        _op_record("OP_A", "FLOAT16", 2, 33, float("inf"), "failed"),
        _op_record("OP_B", "FLOAT32", 3, 257, 0.5),
        _op_record("OP_B", "FLOAT32", 4, 4097, 30.0, "failed"),
    ]
    (tmp_path / "results.json").write_text(json.dumps({"schema_version": 1, "cases": cases}))
    results = load_results(tmp_path)
    chart = build_accuracy(results)
    assert chart is not None and chart.band is not None and chart.over == 2
    left, top, right, bottom = chart.plot
    band_top, band_bottom, nan_y = chart.band
    assert band_bottom < top  # the band sits above the main axis, past a gap
    assert chart.yticks[-1][1] == "1e3"  # the main axis ends at the clip
    # the limit line is well inside the main axis, a fifth of its height or more from either edge
    # (on an axis up to 1e47 it would sit 2% above the bottom)
    assert top + (bottom - top) / 5 < chart.one_y < bottom - (bottom - top) / 5
    points = {p.case: p for s in chart.series for p in s.points}
    huge, infinite = points[cases[1]["id"]], points[cases[2]["id"]]
    assert huge.clipped == "over" and band_top <= huge.y <= band_bottom and huge.ratio == 4.2e46
    assert infinite.clipped == "top" and infinite.y == nan_y
    thirty = points[cases[4]["id"]]
    assert thirty.clipped == "" and top < thirty.y < chart.one_y
    html = render_html(results)
    svg = re.search(r'<svg class="accuracy".*?</svg>', html, re.S)
    assert svg and 'id="accuracy-band"' in svg.group(0) and "&gt; 1e3" in svg.group(0)
    assert "error / budget = 4.2e+46" in svg.group(0)  # the exact figure in the tooltip
    # a passing run has no band and no break
    passing = [c for c in cases if c["outcome"] == "passed"]
    (tmp_path / "results.json").write_text(json.dumps({"schema_version": 1, "cases": passing}))
    chart = build_accuracy(load_results(tmp_path))
    assert chart is not None and chart.band is None and chart.over == 0


def test_accuracy_chart_one_colour_per_operator(tmp_path: Path) -> None:
    from dmlconform.report.accuracy_by_size import build_accuracy

    ops = [f"OP_{c}" for c in "ABCDEFG"]
    cases = [
        _op_record(op, dt, i * 4 + j, n, 0.1 * (j + 1))
        for i, op in enumerate(ops)
        for j, (dt, n) in enumerate([("FLOAT32", 31), ("FLOAT32", 1025), ("FLOAT16", 33), ("FLOAT16", 4097)])
    ]
    (tmp_path / "results.json").write_text(
        json.dumps({"schema_version": 1, "data_types": ["FLOAT32", "FLOAT16"], "cases": cases})
    )
    chart = build_accuracy(load_results(tmp_path))
    assert chart is not None
    colour = {}
    for s in chart.series:
        assert colour.setdefault(s.operator, s.colour) == s.colour  # both data types: one colour
    assert len(set(colour.values())) == len(ops)  # no colour repeats across operators
    assert [e.label for e in chart.operators] == ops
    shapes = {s.data_type: (s.marker, s.dash) for s in chart.series}
    assert shapes["FLOAT32"] != shapes["FLOAT16"] and [e.label for e in chart.data_types] == [
        "FLOAT32",
        "FLOAT16",
    ]


def test_the_smoke_tier_says_in_one_line_that_it_keeps_its_own_number_of_cases(tmp_path: Path) -> None:
    from helpers import dmlconform

    args = ["run", "--backend", "reference", "--operators", "LP", "--dtypes", "FLOAT32", "--kinds", "numeric"]
    proc = dmlconform(*args, "--tier", "smoke", "--cases", "3", "--report", "r", cwd=tmp_path)
    notes = [ln for ln in proc.stdout.splitlines() if "the smoke tier runs" in ln]
    assert proc.returncode == 0 and len(notes) == 1, proc.stdout[-2000:]
    assert "2 numeric and metamorphic cases per group, not the 3 of --cases" in notes[0]
    cases = json.loads((tmp_path / "r" / "results.json").read_text())["cases"]
    assert max(c["index"] for c in cases) == 1  # two per group, as the note says
    quiet = dmlconform(*args, "--tier", "smoke", "--cases", "2", "--report", "q", cwd=tmp_path)
    assert "the smoke tier runs" not in quiet.stdout
