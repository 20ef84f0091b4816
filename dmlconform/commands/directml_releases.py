"""``dmlconform directml accept | sweep | publish``: DirectML releases held against the spec.

    dmlconform directml accept [--version V ...|all] [--out DIR]   CreateOperator on the corpus
    dmlconform directml sweep  [--version V ...|all] [--out DIR] [--cases N] [--wave-ops both|on|off] [--no-runs]
    dmlconform directml publish DIR [--out docs/directml-conformance.md]

``accept`` asks the releases about every probe of the acceptance corpus and prints the agreement
and every disagreement by the finding that decides it (exit 1 when one is undecided), and the
answers that failed (neither accepted nor refused). ``sweep`` does that, a conformance run per
release and the reproducers' replays, into one directory that ``publish`` turns into the
published table (the page is written either way; exit 1 when a disagreement is undecided, with
one line naming how many and one of them, or a run failure is unexplained, so a new one cannot
slip into the table unnoticed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the work modules load when a verb runs, not when the parsers are built
    from dmlconform.releases.acceptance import ReleaseAnswers
    from dmlconform.releases.findings import Registry
    from dmlconform.releases.matrix import Judged
    from dmlconform.specification.spec import Spec

DEFAULT_OUT = "reports/directml-releases"
DEFAULT_DOC = "docs/directml-conformance.md"


def register(verbs: Any) -> None:
    _register_accept(verbs)
    _register_sweep(verbs)
    _register_publish(verbs)


def _register_accept(verbs: Any) -> None:
    accept_p = verbs.add_parser(
        "accept",
        help="ask DirectML releases about every probe of the acceptance corpus",
        description="Send every desc of the acceptance corpus (legal descs at each level up to the "
        "release's maximum, and illegal ones breaking each rule) to CreateOperator/CompileOperator of "
        "each release and record the answers with the agreement matrix. Exit status: 0 done, 2 a "
        "release or the stack is missing.",
    )
    _versions_argument(accept_p)
    accept_p.add_argument(
        "-o", "--out", default=DEFAULT_OUT, metavar="DIR", help=f"answers directory (default {DEFAULT_OUT})"
    )
    _corpus_arguments(accept_p)
    accept_p.set_defaults(run=run_accept)


def _register_sweep(verbs: Any) -> None:
    sweep_p = verbs.add_parser(
        "sweep",
        help="acceptance, a conformance run and the reproducers on every release, into one directory",
        description="For every runnable release: its self-test, the acceptance corpus, a conformance "
        "run and the findings' reproducers, all under one directory that 'publish' turns into the "
        "published table. Exit status: 0 done, 2 a release or the stack is missing.",
    )
    _versions_argument(sweep_p)
    sweep_p.add_argument(
        "-o", "--out", default=DEFAULT_OUT, metavar="DIR", help=f"sweep directory (default {DEFAULT_OUT})"
    )
    _corpus_arguments(sweep_p)
    sweep_p.add_argument(
        "--cases", type=int, default=2, metavar="N", help="run --cases per release (default 2)"
    )
    sweep_p.add_argument(
        "--tier",
        default="default",
        choices=("smoke", "default", "stress"),
        help="run --tier: smoke, default or stress (default: default)",
    )
    sweep_p.add_argument(
        "--wave-ops",
        default="both",
        choices=("both", "on", "off"),
        help="the backend's wave_ops setting(s) the runs and replays judge (default: both)",
    )
    sweep_p.add_argument(
        "--no-runs", action="store_true", help="skip the conformance runs (keep any already there)"
    )
    sweep_p.add_argument(
        "--cases-root",
        default=".",
        metavar="DIR",
        help="where cases/directml/ lies (default: the current directory)",
    )
    sweep_p.set_defaults(run=run_sweep)


def _register_publish(verbs: Any) -> None:
    publish_p = verbs.add_parser(
        "publish",
        help="write docs/directml-conformance.md from a sweep directory",
        description="Generate the published DirectML conformance table (releases x operators, "
        "acceptance agreement, findings with their reproducers) from a sweep directory. Exit status: 0 "
        "written, 1 written but a disagreement no finding claims (undecided) or a run failure no finding "
        "explains is in it, 2 the sweep directory is missing or incomplete.",
    )
    publish_p.add_argument(
        "sweep_dir", nargs="?", default=DEFAULT_OUT, metavar="DIR", help=f"default {DEFAULT_OUT}"
    )
    publish_p.add_argument("-o", "--out", default=DEFAULT_DOC, metavar="FILE", help=f"default {DEFAULT_DOC}")
    publish_p.set_defaults(run=run_publish)


def _versions_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--version",
        action="append",
        metavar="V",
        help="DirectML release (repeatable; default 'all': every installed release whose self-test passes)",
    )


def _corpus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument(
        "--legal", type=int, default=12, metavar="N", help="legal descs per level and data type (default 12)"
    )
    p.add_argument(
        "--illegal", type=int, default=6, metavar="N", help="illegal descs per level and rule (default 6)"
    )
    p.add_argument(
        "--edges",
        type=int,
        default=1,
        metavar="N",
        help="legal descs per level and data type whose every rule edge is a probe (default 1; 0: none)",
    )


def _err(verb: str, message: str) -> int:
    print(f"dmlconform directml {verb}: error: {message}", file=sys.stderr)
    return 2


def _versions(requested: list[str] | None) -> list[str]:
    """The releases asked for, in table order; KeyError names the known ones."""
    from dmlconform.backends.directml.releases import RELEASES, release

    if not requested or "all" in requested:
        return [r.dml_version for r in RELEASES]
    for v in requested:
        release(v)
    wanted = set(requested)
    return [r.dml_version for r in RELEASES if r.dml_version in wanted]


def run_accept(args: argparse.Namespace) -> int:
    from dmlconform.backends.directml import status
    from dmlconform.backends.directml.stack import StackMissing
    from dmlconform.releases import acceptance as acc
    from dmlconform.releases import matrix
    from dmlconform.releases.findings import registry
    from dmlconform.specification.spec import load_spec

    try:
        versions = _versions(args.version)
    except KeyError as exc:
        return _err("accept", str(exc).strip("'\""))
    spec = load_spec()
    settings = acc.Settings(seed=args.seed, legal=args.legal, illegal=args.illegal, edges=args.edges)
    start = time.monotonic()
    probes = acc.corpus(spec, settings)
    print(f"corpus: {len(probes)} probes (seed {args.seed}) in {time.monotonic() - start:.1f} s")
    out = Path(args.out)
    expect = matrix.Expectations(spec)
    reg = registry()
    undecided = 0
    for v in versions:
        if not status.installed(v):
            if args.version and "all" not in args.version:
                return _err(
                    "accept", f"DirectML {v} is not installed: run dmlconform directml setup --version {v}"
                )
            continue
        try:
            measured = status.measure(v, spec)
        except StackMissing as exc:
            return _err("accept", str(exc))
        status.write(measured)
        if not measured.runs:
            print(f"DirectML {v}: cannot run here, not judged: {measured.detail}")
            continue
        answers = acc.ask_release(v, probes, settings, spec)
        acc.write_answers(answers, out)
        undecided += _print_judgement(v, answers, matrix.judge(expect, probes, answers), spec, reg)
    print(f"answers in {out}; {undecided} undecided disagreement(s)")
    return 1 if undecided else 0


def _print_judgement(v: str, answers: ReleaseAnswers, judged: list[Judged], spec: Spec, reg: Registry) -> int:
    """Print a release's totals, its disagreements grouped by the finding that decides them and
    its failed answers; return how many disagreements no finding decides."""
    from dmlconform.releases import acceptance as acc
    from dmlconform.releases import matrix

    m = matrix.acceptance(spec, judged, v, answers.max_feature_level)
    t = m.totals()
    lg, il = t[matrix.LEGAL], t["illegal"]
    print(
        f"DirectML {v} ({answers.max_feature_level}), probes at its level and below: legal {lg.accepted} "
        f"accepted / {lg.refused} refused; illegal {il.refused} refused / {il.accepted} accepted; "
        f"{lg.failed + il.failed} failed; {lg.inexpressible + il.inexpressible} cannot be asked; "
        f"{lg.error + il.error} errors ({answers.seconds:.1f} s)"
    )
    groups: dict[tuple[str, str, str, str], int] = {}
    undecided = 0
    for j in matrix.disagreements(judged):
        owners = reg.explain_judged(j, spec)
        where = f" by {acc.STAGE_CALLS[j.stage]}" if j.verdict == acc.REFUSED and j.stage else ""
        key = ("+".join(owners) or "UNDECIDED", j.probe.operator, j.expect_key, j.verdict + where)
        groups[key] = groups.get(key, 0) + 1
        undecided += not owners
    for (fid, op, rule, verdict), n in sorted(groups.items()):
        print(f"  {fid:<9} {op} breaks {rule}: {verdict} ({n} probes)")
    for line in acc.failure_lines(answers):
        print(f"  {line}")
    return undecided


def run_sweep(args: argparse.Namespace) -> int:
    from dmlconform.backends.directml import provision
    from dmlconform.backends.directml.stack import StackMissing
    from dmlconform.releases.sweep import WAVE_OPS, SweepSettings, sweep
    from dmlconform.specification.spec import load_spec

    try:
        versions = _versions(args.version)
    except KeyError as exc:
        return _err("sweep", str(exc).strip("'\""))
    if args.cases < 1:
        return _err("sweep", "--cases must be at least 1")
    root = Path(args.cases_root)
    if not (root / "cases" / "directml").is_dir():
        return _err(
            "sweep", f"no cases/directml under {root.resolve()}: run from the project or pass --cases-root"
        )
    settings = SweepSettings(
        cases=args.cases,
        seed=args.seed,
        legal=args.legal,
        illegal=args.illegal,
        edges=args.edges,
        tier=args.tier,
        wave_ops=WAVE_OPS if args.wave_ops == "both" else (args.wave_ops,),
    )
    start = time.monotonic()
    try:
        meta = sweep(versions, settings, load_spec(), Path(args.out), root, print, runs=not args.no_runs)
    except (StackMissing, provision.ProvisionError) as exc:
        return _err("sweep", str(exc))
    print(
        f"sweep of {len(meta['runnable'])} release(s) in {time.monotonic() - start:.0f} s: {args.out}; "
        f"publish with: dmlconform directml publish {args.out}"
    )
    return 0


def run_publish(args: argparse.Namespace) -> int:
    from dmlconform.releases.publish import PublishError, load, render
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    try:
        sweep = load(Path(args.sweep_dir), spec)
    except PublishError as exc:
        return _err("publish", str(exc))
    text, health = render(sweep, spec)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(
        f"wrote {out}: {len(sweep.answers)} release(s), {health['undecided']} undecided disagreement(s), "
        f"{health['unexplained']} unexplained run failure(s), {health['failed']} failed answer(s)"
    )
    if health["undecided"]:
        print(f"dmlconform directml publish: error: {health['undecided_line']}", file=sys.stderr)
    return 1 if health["undecided"] or health["unexplained"] else 0
