"""docs/directml-conformance.md from a release sweep's directory (``sweep.py``): nothing measured here.

Every figure comes from the sweep's files: the releases' self-tests (releases.json), DirectML's
verdicts on the acceptance corpus (acceptance-*.json, judged here against the spec by
``matrix``), the conformance runs (runs/<V>/results.json, through ``report.releases``; with
wave_ops=off under runs-wave-ops-off/) and the reproducers' replays (replays.json,
replays-wave-ops-off.json). The findings' decisions and evidence come from
``findings.yaml``; which releases show each finding is computed from the sweep.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmlconform.errors import hresult_hex
from dmlconform.releases import acceptance as acc
from dmlconform.releases import matrix
from dmlconform.releases.findings import Finding, Registry, registry
from dmlconform.releases.sweep import WAVE_OPS, replays_path, runs_dir
from dmlconform.specification.spec import Spec

PUBLISH_COMMAND = "dmlconform directml publish"
SWEEP_COMMAND = "dmlconform directml sweep"


class PublishError(ValueError):
    """The sweep directory cannot be published; the message is one line."""


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _span(releases: list[str], order: list[str]) -> str:
    """Releases as ranges of consecutive ones in ``order``: 1.8.0-1.14.1, 1.15.4."""
    if not releases:
        return "none"
    idx = sorted(order.index(r) for r in releases if r in order)
    groups: list[list[int]] = []
    for i in idx:
        if groups and i == groups[-1][-1] + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    parts = [order[g[0]] if len(g) == 1 else f"{order[g[0]]} to {order[g[-1]]}" for g in groups]
    return ", ".join(parts) + (" (all)" if len(idx) == len(order) > 1 else "")


@dataclass
class Sweep:
    """A sweep directory, loaded."""

    path: Path
    releases: list[dict[str, Any]]
    answers: list[acc.ReleaseAnswers]
    runs: dict[str, Any]  # release -> Results
    replays: dict[str, Any]
    meta: dict[str, Any]
    probes: list[acc.Probe] = field(default_factory=list)
    #: the runs and replays of the other wave_ops settings: setting -> release -> Results, and
    #: setting -> replays.json's table (``runs`` and ``replays`` are the default's, wave_ops=on)
    other_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    other_replays: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def order(self) -> list[str]:
        return [a.release for a in self.answers]


def load(path: Path, spec: Spec) -> Sweep:
    from dmlconform.report import load_results

    if not path.is_dir():
        raise PublishError(f"{path}: not a sweep directory (run {SWEEP_COMMAND} --out {path})")
    try:
        releases = json.loads((path / "releases.json").read_text(encoding="utf-8"))["releases"]
    except (OSError, ValueError, KeyError) as exc:
        raise PublishError(
            f"{path / 'releases.json'}: cannot read ({exc}): run {SWEEP_COMMAND} --out {path}"
        ) from None
    try:
        answers = acc.load_answers(path)
    except ValueError as exc:
        raise PublishError(str(exc)) from None
    if not answers:
        raise PublishError(f"{path}: no acceptance-*.json: run {SWEEP_COMMAND} --out {path}")
    settings = {a.settings for a in answers}
    if len(settings) > 1:
        raise PublishError(f"{path}: the acceptance files were made with different corpus settings")
    runs, replays = {}, {}
    for w in WAVE_OPS:
        runs[w] = {}
        for a in answers:
            run_dir = runs_dir(path, w) / a.release
            if (run_dir / "results.json").is_file():
                runs[w][a.release] = load_results(run_dir)
        replays_file = replays_path(path, w)
        replays[w] = json.loads(replays_file.read_text(encoding="utf-8")) if replays_file.is_file() else {}
    meta_file = path / "sweep.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else {}
    default = WAVE_OPS[0]
    sweep = Sweep(path, releases, answers, runs.pop(default), replays.pop(default), meta)
    sweep.other_runs = {w: r for w, r in runs.items() if r}
    sweep.other_replays = {w: r for w, r in replays.items() if r}
    sweep.probes = acc.corpus(spec, answers[0].settings)
    known = {p.id for p in sweep.probes}
    for a in answers:
        if set(a.verdicts) - known:
            raise PublishError(
                f"{path}: acceptance-{a.release}.json names probes this spec does not generate "
                "(the spec or generators changed since the sweep): sweep again"
            )
    return sweep


# --------------------------------------------------------------------------------------------
# Sections


def _stack_lines(sweep: Sweep) -> list[str]:
    for results in sweep.runs.values():
        v = results.versions
        facts = [
            ("Wine", v.get(f"{results.backend_name}.wine")),
            ("vkd3d", v.get(f"{results.backend_name}.vkd3d")),
            ("Vulkan driver", v.get(f"{results.backend_name}.vulkan_driver")),
            ("adapter", v.get(f"{results.backend_name}.adapter")),
        ]
        return [f"- {k}: {_md(x)}" for k, x in facts if x] + _wave_lines(sweep)
    return []


def _wave_lines(sweep: Sweep) -> list[str]:
    """What DirectML was told about wave operations in each setting's runs (the stack records
    it: results.json versions directml.wave_ops)."""
    seen = []
    for w, runs in [(WAVE_OPS[0], sweep.runs), *sweep.other_runs.items()]:
        said = {str(r.versions.get(f"{r.backend_name}.wave_ops")) for r in runs.values()} - {"None"}
        if said:
            seen.append(f"{'; '.join(sorted(said))} (`{runs_dir(Path(), w)}/`)")
    return ["- wave ops, as DirectML sees them: " + _md(", ".join(seen))] if seen else []


def releases_section(sweep: Sweep) -> list[str]:
    lines = [
        "## Releases",
        "",
        "Every `DirectML.dll` comes from a Windows wheel of `onnxruntime-directml` (`dmlconform directml "
        "setup --version V`). Whether a release runs here is decided by its self-test on this stack "
        "(`dmlconform directml versions`); a release that cannot run is reported, never judged.",
        "",
        "| DirectML | wheel | max feature level | here |",
        "|---|---|---|---|",
    ]
    for r in sweep.releases:
        st = r.get("status") or {}
        level = st.get("max_feature_level") or "-"
        if not r.get("installed"):
            here = "not installed"
        elif st.get("runs"):
            here = "runs"
        else:
            here = f"cannot run here: {_md(st.get('detail', '?'))} (table: {_md(r.get('table_note', ''))})"
        lines.append(f"| {r['release']} | `{r['wheel']}` | {level} | {here} |")
    return lines


def _judged(sweep: Sweep, spec: Spec) -> dict[str, list[matrix.Judged]]:
    expect = matrix.Expectations(spec)
    return {a.release: matrix.judge(expect, sweep.probes, a) for a in sweep.answers}


def acceptance_section(sweep: Sweep, spec: Spec, judged: dict[str, list[matrix.Judged]]) -> list[str]:
    matrices = {
        a.release: matrix.acceptance(spec, judged[a.release], a.release, a.max_feature_level)
        for a in sweep.answers
    }
    return [
        *_acceptance_intro(sweep),
        *(_acceptance_totals_row(a, matrices[a.release]) for a in sweep.answers),
        *_acceptance_by_operator(sweep, matrices),
        *_acceptance_by_rule(sweep, spec, matrices),
    ]


def _acceptance_intro(sweep: Sweep) -> list[str]:
    """The corpus the releases were asked about, and the head of the totals table."""
    st = sweep.answers[0].settings
    return [
        "## Acceptance: DirectML's CreateOperator and CompileOperator against the spec",
        "",
        f"The corpus: at every feature level, {st.legal} legal descs per data type and {st.illegal} illegal "
        f"descs per rule that can be broken alone"
        + (
            f", and the edge corpus of {st.edges} legal desc{'s' if st.edges != 1 else ''} per data type "
            f"(every legal desc at the edge of a rule made from it: `dmlconform generate --edges`; "
            f"{sum(1 for p in sweep.probes if p.kind == 'edge')} probes)"
            if st.edges
            else ""
        )
        + f" (generator seed {st.seed}); {len(sweep.probes)} probes. "
        "Each release is asked about every probe (CreateOperator, then CompileOperator) and judged against "
        "the spec at its own maximum level. The counts below cover the probes generated at that level and "
        "below; a refusal counts whichever stage gave it, and those CompileOperator gave are counted again "
        "in brackets; 'failed' are answers that were neither S_OK nor a refusal (an HRESULT other than "
        "E_INVALIDARG and E_NOTIMPL: no verdict, so neither agreement nor disagreement); 'cannot be asked' "
        "are illegal descs whose broken rule DirectML's C structs cannot carry (a count that differs from "
        "its array, an omitted member).",
        "",
        "| release | level | probes | legal accepted | legal refused | illegal refused | illegal accepted | failed | cannot be asked | errors | agreement |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]


def _acceptance_totals_row(a: acc.ReleaseAnswers, m: matrix.Matrix) -> str:
    """One release's totals; its agreement is 'n/a' when no probe could be asked."""
    t = m.totals()
    lg, il = t[matrix.LEGAL], t["illegal"]
    asked = lg.accepted + lg.refused + il.refused + il.accepted
    agree = lg.accepted + il.refused
    return (
        f"| {a.release} | {a.max_feature_level} | {lg.total + il.total} | {lg.accepted} | {_refused(lg)} | "
        f"{_refused(il)} | {il.accepted} | {lg.failed + il.failed} | {lg.inexpressible + il.inexpressible} | "
        f"{lg.error + il.error} | {agree / asked:.2%} |"
        if asked
        else f"| {a.release} | {a.max_feature_level} | {lg.total + il.total} | 0 | 0 | 0 | 0 | "
        f"{lg.failed + il.failed} | {lg.inexpressible + il.inexpressible} | {lg.error + il.error} | n/a |"
    )


def _acceptance_by_operator(sweep: Sweep, matrices: dict[str, matrix.Matrix]) -> list[str]:
    lines = [
        "",
        "Per operator (legal accepted / refused; illegal refused / accepted; and the failed answers "
        "where there are any):",
        "",
        "| operator | " + " | ".join(a.release for a in sweep.answers) + " |",
        "|---|" + "---|" * len(sweep.answers),
    ]
    ops = sorted({op for m in matrices.values() for op in m.by_operator()})
    for op in ops:
        cells = []
        for a in sweep.answers:
            c = matrices[a.release].by_operator().get(op)
            if c is None:
                cells.append("-")
                continue
            lg, il = c[matrix.LEGAL], c["illegal"]
            failed = lg.failed + il.failed
            cells.append(
                f"{lg.accepted}/{lg.refused}; {il.refused}/{il.accepted}"
                + (f"; {failed} failed" if failed else "")
            )
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return lines


def _acceptance_by_rule(sweep: Sweep, spec: Spec, matrices: dict[str, matrix.Matrix]) -> list[str]:
    """The per-rule table, folded in a <details> block: it has a row per (operator, rule)."""
    lines = [
        "",
        "<details><summary>Per rule (the rules a probe breaks at the release's level; refused / asked "
        "for illegal probes, accepted / asked for legal ones; the generated levels in the last column)</summary>",
        "",
        "| operator | rule | " + " | ".join(a.release for a in sweep.answers) + " | levels |",
        "|---|---|" + "---:|" * len(sweep.answers) + "---|",
    ]
    rows: dict[tuple[str, str], dict[str, tuple[matrix.Cell, list[str]]]] = defaultdict(dict)
    for a in sweep.answers:
        for key, value in matrices[a.release].by_rule().items():
            rows[key][a.release] = value
    for (op, rule), per in sorted(rows.items()):
        lines.append(_rule_row(sweep, spec, op, rule, per))
    return [*lines, "", "</details>"]


def _rule_row(
    sweep: Sweep, spec: Spec, op: str, rule: str, per: dict[str, tuple[matrix.Cell, list[str]]]
) -> str:
    """A rule's row: what each release got right of what it was asked, and the levels it spans."""
    cells = []
    levels: set[str] = set()
    for a in sweep.answers:
        if a.release not in per:
            cells.append("-")
            continue
        cell, lvs = per[a.release]
        levels |= set(lvs)
        asked = cell.accepted + cell.refused
        good = cell.accepted if rule == matrix.LEGAL else cell.refused
        cells.append(f"{good}/{asked}" if asked else "n/a")
    span = sorted(levels, key=spec.level)
    return f"| {op} | {rule} | " + " | ".join(cells) + f" | {span[0]}..{span[-1]} |"


def _refused(cell: matrix.Cell) -> str:
    """A refusal count, with those CompileOperator gave in brackets."""
    compiled = cell.refused_at.get(acc.COMPILE, 0)
    return f"{cell.refused} ({compiled} by CompileOperator)" if compiled else str(cell.refused)


def _answer(verdict: str, stage: str | None) -> str:
    """How the page names DirectML's answer: ``accepted``, ``refused by CompileOperator``."""
    if verdict == acc.REFUSED and stage:
        return f"refused by {acc.STAGE_CALLS.get(stage, stage)}"
    return verdict


@dataclass
class Undecided:
    """The disagreements no finding claims: how many, and the first (release, probe id)."""

    count: int = 0
    example: tuple[str, str] | None = None

    def add(self, release: str, probe_id: str) -> None:
        self.count += 1
        if self.example is None:
            self.example = (release, probe_id)

    def line(self) -> str:
        """One line for the command: the count and an example."""
        if not self.count or self.example is None:
            return "no undecided disagreement"
        release, probe = self.example
        return (
            f"{self.count} undecided disagreement(s) (no finding in findings.yaml claims them), e.g. "
            f"probe {probe} on DirectML {release}"
        )


def disagreements_section(
    sweep: Sweep, spec: Spec, judged: dict[str, list[matrix.Judged]], reg: Registry
) -> tuple[list[str], dict[str, list[str]], Undecided]:
    """The disagreements grouped by (finding, operator, rule, verdict and stage), the releases that
    show each finding's disagreements, and the undecided ones; then the failed answers."""
    groups: dict[tuple[str, str, str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    shown: dict[str, list[str]] = defaultdict(list)
    undecided = Undecided()
    for a in sweep.answers:
        for j in matrix.disagreements(judged[a.release]):
            owners = reg.explain_judged(j, spec)
            key_id = "+".join(owners) if owners else "undecided"
            if not owners:
                undecided.add(a.release, j.probe.id)
            answer = _answer(j.verdict, j.stage)
            groups[(key_id, j.probe.operator, j.expect_key, answer)][a.release].append(j.probe.id)
            for o in owners:
                if a.release not in shown[o]:
                    shown[o].append(a.release)
    lines = [
        "### Every disagreement",
        "",
        "Probes DirectML answered otherwise than the spec at the release's level (all generated levels), "
        "by the finding that decides them:",
        "",
        "| finding | operator | the spec says it breaks | DirectML | releases (probes) | e.g. |",
        "|---|---|---|---|---|---|",
    ]
    if not groups:
        lines.append("| - | - | - | - | none | - |")
    for (fid, op, rule, verdict), per in sorted(groups.items()):
        rel = ", ".join(f"{r} ({len(per[r])})" for r in sweep.order if r in per)
        example = next(iter(per.values()))[0]
        lines.append(f"| {fid} | {op} | {rule} | {verdict} | {rel} | `{example}` |")
    lines += [
        "",
        f"{undecided.count} undecided disagreement(s)."
        + ("" if not undecided.count else " **Each needs a decision in findings.yaml.**"),
        "",
        *failures_lines(sweep, judged),
    ]
    return lines, shown, undecided


def failures_lines(sweep: Sweep, judged: dict[str, list[matrix.Judged]]) -> list[str]:
    """The answers that failed: by release, stage and HRESULT (all generated levels)."""
    lines = [
        "### Answers that failed",
        "",
        "Probes a stage answered with an HRESULT other than S_OK, E_INVALIDARG and E_NOTIMPL: not a verdict "
        "on the desc, so they count neither as agreement nor as disagreement.",
        "",
    ]
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for a in sweep.answers:
        for j in matrix.failures(judged[a.release]):
            code = hresult_hex(j.hresult) if j.hresult is not None else "?"
            groups[(a.release, acc.STAGE_CALLS.get(j.stage or "", str(j.stage)), code)].append(j.probe.id)
    if not groups:
        return [*lines, "None."]
    lines += ["| release | stage | HRESULT | probes | e.g. |", "|---|---|---|---:|---|"]
    for (release, stage, code), ids in sorted(
        groups.items(), key=lambda kv: (sweep.order.index(kv[0][0]), kv[0][1:])
    ):
        lines.append(f"| {release} | {stage} | {code} | {len(ids)} | `{ids[0]}` |")
    return lines


def _explained_by(
    b: matrix.Boundary, judged: dict[str, list[matrix.Judged]], spec: Spec, reg: Registry
) -> str:
    """The findings that decide a boundary's disagreeing witnesses ('undecided' if any is not)."""
    witnesses = set(b.witnesses)
    owners: list[str] = []
    for release, _ in b.below + b.above:
        for j in judged.get(release, []):
            if j.probe.id in witnesses and j.agrees is False:
                found = reg.explain_judged(j, spec)
                for o in found or ["undecided"]:
                    if o not in owners:
                        owners.append(o)
    return ", ".join(owners)


def availability_section(
    sweep: Sweep, spec: Spec, judged: dict[str, list[matrix.Judged]], reg: Registry
) -> list[str]:
    expect = matrix.Expectations(spec)
    bounds = matrix.availability(spec, expect, sweep.probes, sweep.answers)
    lines = [
        "## Availability: level-bound rules against releases that straddle them",
        "",
        "Each change between feature levels (`dmlconform spec-diff --from 1_0 --to 6_4`) is held against "
        "the releases whose maximum levels lie on either side of it. Witnesses are the probes that break "
        "exactly that rule on the lower side and nothing on the upper; each release must refuse them below "
        "the change and accept them from it (refused or accepted / witnesses it was judged on).",
        "",
        "| operator | level | change | rule | below | at or above | agrees |",
        "|---|---|---|---|---|---|---|",
    ]
    skipped: dict[str, list[str]] = defaultdict(list)
    for b in bounds:
        if not b.straddled:
            skipped[b.reason()].append(f"{b.operator} {b.rule} ({b.level})")
            continue

        def side(rows: list[tuple[str, str]], b: matrix.Boundary = b) -> str:
            out = []
            for r, _ in rows:
                ok, n = b.results.get(r, (0, 0))
                if n:
                    out.append(f"{r} {ok}/{n}")
            return ", ".join(out) or "-"

        verdict = {True: "yes", False: "**no**", None: "no witness"}[b.agrees]
        if b.agrees is False:
            verdict += f" ({_explained_by(b, judged, spec, reg)})"
        lines.append(
            f"| {b.operator} | {b.level} | {_md(b.kind)}: {_md(b.subject)} | {b.rule} | {side(b.below)} | "
            f"{side(b.above)} | {verdict} |"
        )
    for reason, items in skipped.items():
        lines += ["", f"Not confronted ({reason}): " + "; ".join(items) + "."]
    return lines


def runs_section(sweep: Sweep, spec: Spec) -> list[str]:
    from dmlconform.report.releases import releases_view, render_markdown

    if not sweep.runs:
        return ["## Conformance runs", "", "No runs in this sweep."]
    view = releases_view(list(sweep.runs.values()))
    settings = sweep.meta.get("settings", {})
    lines = [
        "## Conformance runs, release by release",
        "",
        f"`dmlconform run --backend directml --backend-option version=V --tier {settings.get('tier', '?')} "
        f"--cases {settings.get('cases', '?')} --seed {settings.get('seed', '?')}`, each release at its own "
        "maximum level (no expected-failures file: every failure shows). A case id names its level, so "
        "releases at different levels share the seeded cases of the levels both reach.",
        "",
    ]
    from dmlconform.runner.results import spec_hash

    stale = [r.label for r in view.releases if r.spec_hash and r.spec_hash != spec_hash(spec)]
    if stale:
        lines += [
            f"**The runs of {', '.join(stale)} were judged against another spec than this page's: sweep again.**",
            "",
        ]
    body = render_markdown(view, heading="###")
    lines += body.splitlines()[2:]  # drop the view's own heading
    for w, runs in sweep.other_runs.items():
        lines += ["", *other_setting_lines(sweep, w, runs)]
    return lines


def other_setting_lines(sweep: Sweep, wave_ops: str, runs: dict[str, Any]) -> list[str]:
    """The runs with another wave_ops setting: their summary per release and every case whose
    outcome differs from the default's (the reductions DirectML picks by WaveOps)."""
    lines = [
        f"### The same runs with `wave_ops={wave_ops}`",
        "",
        "DirectML picks some FLOAT32 reductions by whether the device reports D3D12 WaveOps. The runs "
        "above are judged as on a GPU (the runner reports WaveOps, the backend's default); these with "
        f"`--backend-option wave_ops={wave_ops}` ({runs_dir(Path(), wave_ops)}/).",
        "",
        f"| release | total | passed | failed | errors | skipped | outcome differs from wave_ops={WAVE_OPS[0]} |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for release in sweep.order:
        results = runs.get(release)
        if results is None:
            continue
        s = results.summary()
        base = sweep.runs.get(release)
        if base is None:
            changed = "no default run"
        else:
            before = {c.id: c.outcome for c in base.cases}
            moved = [
                f"`{c.id}` ({before[c.id]} -> {c.outcome})"
                for c in results.cases
                if before.get(c.id, c.outcome) != c.outcome
            ]
            changed = (", ".join(moved[:10]) + (" ..." if len(moved) > 10 else "")) if moved else "none"
        lines.append(
            f"| {release} | {s.get('total', 0)} | {s.get('passed', 0)} | {s.get('failed', 0)} | "
            f"{s.get('errors', 0)} | {s.get('skipped', 0)} | {changed} |"
        )
    return lines


def _labelled_runs(sweep: Sweep) -> list[tuple[str, Any]]:
    """(label, results) of every run: the release for the default setting, "1.15.4 wave_ops=off"
    for another."""
    out = list(sweep.runs.items())
    for w, runs in sweep.other_runs.items():
        out += [(f"{release} wave_ops={w}", results) for release, results in runs.items()]
    return out


def _failing_by_finding(
    sweep: Sweep, reg: Registry
) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Failing run cases per finding and label (see _labelled_runs), and those no finding claims."""
    claimed: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    unexplained: dict[str, list[str]] = defaultdict(list)
    for release, results in _labelled_runs(sweep):
        for case in results.cases:
            if not case.failing:
                continue
            fid = reg.explain_case(case.id, case.reduction_length)
            if fid is None:
                unexplained[release].append(case.id)
            else:
                claimed[fid][release] += 1
    return claimed, unexplained


def findings_section(sweep: Sweep, reg: Registry, shown: dict[str, list[str]]) -> tuple[list[str], int]:
    claimed, unexplained = _failing_by_finding(sweep, reg)
    labels = [label for label, _ in _labelled_runs(sweep)]
    lines = [
        "## Findings",
        "",
        "| | finding | decision | acceptance | failing run cases | reproducer shows it on |",
        "|---|---|---|---|---|---|",
    ]
    detail: list[str] = []
    for f in reg.findings:
        lines.append(_finding_row(sweep, f, shown, claimed.get(f.id, {}), labels))
        detail += _finding_detail(sweep, reg, f)
    total_unexplained = sum(len(v) for v in unexplained.values())
    lines += detail
    lines += ["", "### Run failures no finding explains", ""]
    if not total_unexplained:
        lines.append("None: every failing case of every run is claimed by a finding above.")
    for release, ids in unexplained.items():
        lines.append(
            f"- {release}: " + ", ".join(f"`{i}`" for i in ids[:20]) + (" ..." if len(ids) > 20 else "")
        )
    return lines, total_unexplained


def _finding_row(
    sweep: Sweep, f: Finding, shown: dict[str, list[str]], runs: dict[str, int], labels: list[str]
) -> str:
    """A finding's row of the summary table: where acceptance, the runs and its reproducers show it."""
    order = sweep.order
    acc_rel = _span(shown.get(f.id, []), order) if f.acceptance else "-"
    run_text = (
        ", ".join(f"{r} ({runs[r]})" for r in labels if r in runs) if runs else ("none" if f.cases else "-")
    )
    repro_rel: list[str] = []
    for r in f.reproducers:
        outcomes = sweep.replays.get(f.id, {}).get(r.path, {})
        text = f"`{r.path}`: " + _span([v for v, o in outcomes.items() if o.get("outcome") == r.shows], order)
        for w, replays in sweep.other_replays.items():
            other = replays.get(f.id, {}).get(r.path, {})
            if other:
                shows = [v for v, o in other.items() if o.get("outcome") == r.shows]
                text += f"; wave_ops={w}: {_span(shows, order)}"
        repro_rel.append(text)
    return f"| {f.id} | {_md(f.title)} | {f.decision} | {acc_rel} | {run_text} | {'<br>'.join(repro_rel) or '-'} |"


def _finding_detail(sweep: Sweep, reg: Registry, f: Finding) -> list[str]:
    """A finding's own subsection: its decision, evidence, reproducers' replays and experiment."""
    detail = [
        "",
        f"### {f.id}: {f.title}",
        "",
        f"**Decision: {f.decision}.** {reg.decisions[f.decision]}",
        "",
        f.evidence,
    ]
    for r in f.reproducers:
        outcomes = sweep.replays.get(f.id, {}).get(r.path, {})
        if outcomes:
            per = ", ".join(f"{v} {o.get('outcome')}" for v, o in outcomes.items())
            for w, replays in sweep.other_replays.items():
                other = replays.get(f.id, {}).get(r.path, {})
                if other:
                    per += f"; with wave_ops={w}: " + ", ".join(
                        f"{v} {o.get('outcome')}" for v, o in other.items()
                    )
            detail += [
                "",
                f"Reproducer `{r.path}` (shows the finding when it {r.shows}): {per}. "
                f"`dmlconform replay {r.path} --backend directml --backend-option version=V`",
            ]
    if f.experiment:
        detail += ["", f"Experiment: `python {f.experiment} --version V`."]
    return detail


def regenerate_section(sweep: Sweep) -> list[str]:
    settings = sweep.meta.get("settings", {})
    seconds = (
        ", ".join(f"{k} {v:.0f} s" for k, v in (sweep.meta.get("seconds") or {}).items()) or "not recorded"
    )
    return [
        "## Regenerate",
        "",
        "```sh",
        "dmlconform directml setup --version all",
        f"{SWEEP_COMMAND} --out {sweep.path} --cases {settings.get('cases', 2)} --seed {settings.get('seed', 0)}"
        + ("" if len(settings.get("wave_ops") or WAVE_OPS) > 1 else f" --wave-ops {settings['wave_ops'][0]}"),
        f"{PUBLISH_COMMAND} {sweep.path} --out docs/directml-conformance.md",
        "```",
        "",
        "The sweep self-tests every release, asks each runnable one about the corpus, runs the conformance "
        f"suite on it and replays the reproducers (here: {seconds}); publish "
        "reads only the sweep's files. `dmlconform report releases DIR/runs/*` prints the release-by-release "
        "view and `dmlconform report diff DIR/runs/A DIR/runs/B` names every case that changed between two.",
    ]


def render(sweep: Sweep, spec: Spec, reg: Registry | None = None) -> tuple[str, dict[str, Any]]:
    """The markdown page and its health: ``undecided`` disagreements (``undecided_line`` says how
    many, with an example), ``unexplained`` run failures and ``failed`` answers."""
    from dmlconform.runner.results import spec_hash

    reg = reg or registry()
    judged = _judged(sweep, spec)
    dis_lines, shown, undecided = disagreements_section(sweep, spec, judged, reg)
    find_lines, unexplained = findings_section(sweep, reg, shown)
    runnable = [r["release"] for r in sweep.releases if (r.get("status") or {}).get("runs")]
    lines = [
        "# DirectML conformance, release by release",
        "",
        f"<!-- generated by `{PUBLISH_COMMAND} {sweep.path}` from a release sweep; do not edit by hand -->",
        "",
        f"The spec (spec hash `{spec_hash(spec)[:12]}`) held against {len(runnable)} DirectML releases "
        "that run on this project's machine: their own verdicts on what is legal (CreateOperator), their "
        "numbers on the default tier, and every disagreement decided with its evidence. The stack:",
        "",
        *_stack_lines(sweep),
        "",
        "DirectML runs its DXBC (shader model 5.1) shaders here, translated by vkd3d to SPIR-V and run by "
        "lavapipe on the CPU: real DirectML validation, operator selection and shader arithmetic, not the "
        "DXIL shaders or vendor metacommands of a GPU. Findings marked `stack` are this translation's.",
        "",
        *releases_section(sweep),
        "",
        *acceptance_section(sweep, spec, judged),
        "",
        *dis_lines,
        "",
        *availability_section(sweep, spec, judged, reg),
        "",
        *runs_section(sweep, spec),
        "",
        *find_lines,
        "",
        *regenerate_section(sweep),
    ]
    failed = sum(len(matrix.failures(j)) for j in judged.values())
    health = {
        "undecided": undecided.count,
        "unexplained": unexplained,
        "failed": failed,
        "undecided_line": undecided.line(),
    }
    return "\n".join(lines) + "\n", health
