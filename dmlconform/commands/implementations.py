"""``dmlconform implementations``: the table of every implementation, written from their runs.

    dmlconform implementations --run                 run every built-in backend installed, then write the table
    dmlconform implementations R1 R2 ...             write it from runs' report directories
    dmlconform implementations --run numpy jax R1    run some, read others (a DirectML run, say)
    dmlconform implementations R1 --findings F.yaml  a run of your backend with --expect F.yaml

Each column is one run (default tier, ``--seed``); the page (``--out``, default
docs/implementations.md) and its HTML view (``--html``, default the same name .html) say per
operator x data type how many cases were judged, passed and failed, which known findings took
the rest (linked to their explanation and reproducer, from the backends' findings files), the
accuracy class, and each run's versions and the command that reproduces its column. A backend
whose extra is not installed is left out with one line saying which extra to install; the real
DirectML runs only when named (its stack: ``dmlconform directml setup``). Exit status: 0
written, 1 a run failed to finish, 2 unusable input.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

#: built-in backends run by ``--run`` without names: every one but the real DirectML, whose stack
#: is a setup of its own (name it to run it, or give its report)
NOT_BY_DEFAULT = ("directml",)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "implementations",
        help="the table of every implementation: judged, passed, failed, findings, class per operator",
        description="Write docs/implementations.md and its HTML view from runs of the built-in backends: "
        "--run runs them (every installed one but directml, or the ones named), REPORT directories "
        "are read as they are. Exit status: 0 written, 1 a run did not finish, 2 unusable input.",
    )
    p.add_argument(
        "reports", nargs="*", metavar="REPORT", help="report directories of runs to put in the table"
    )
    p.add_argument(
        "--run",
        dest="run_backends",
        nargs="*",
        metavar="BACKEND",
        default=None,
        help="run these built-in backends first (no names: every installed one but directml; default: run none, read the REPORTs)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="the runs' seed (default 0)")
    p.add_argument(
        "--runs-dir",
        metavar="DIR",
        default="reports/implementations",
        help="where --run writes the runs' reports (default reports/implementations)",
    )
    p.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        default="docs/implementations.md",
        help="the page (default %(default)s)",
    )
    p.add_argument("--html", metavar="FILE", default=None, help="its HTML view (default: --out with .html)")
    p.add_argument(
        "--findings",
        metavar="FILE",
        action="append",
        default=[],
        help="a findings file a run applied with --expect (a backend of your own): the table links "
        "its findings from it (repeatable; a backend's own known-findings file is read first)",
    )
    p.set_defaults(run=run)


def _err(message: str) -> int:
    print(f"dmlconform implementations: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from dmlconform.report import ResultsError, load_results

    if args.run_backends is None and not args.reports:
        return _err("name report directories, or --run to run the built-in backends")
    runs: list[Path] = []
    failed = False
    if args.run_backends is not None:
        ran, failed, problem = _run_backends(args.run_backends, args.seed, Path(args.runs_dir))
        if problem:
            return _err(problem)
        runs += ran
    runs += [Path(r) for r in args.reports]
    try:
        loaded = [load_results(r) for r in runs]
    except ResultsError as exc:
        return _err(str(exc))
    try:
        extra = [entry for f in args.findings for entry in _findings_entries(Path(f))]
    except ValueError as exc:
        return _err(f"--findings {exc}")
    out = Path(args.out)
    html_out = Path(args.html) if args.html else out.with_suffix(".html")
    _write(loaded, out, html_out, " ".join(["dmlconform implementations", *sys.argv[2:]]), extra)
    print(f"dmlconform: wrote {out} and {html_out} ({len(loaded)} implementations)")
    return 1 if failed else 0


def _run_backends(names: list[str], seed: int, runs_dir: Path) -> tuple[list[Path], bool, str | None]:
    """Run each backend (default tier) into ``runs_dir/NAME``: (the reports written, whether a
    run did not finish, a usage problem). A backend whose library is missing is left out with
    one line."""
    from dmlconform.backends import BUILTIN_BACKENDS, BackendError, load_backend

    chosen = names or [n for n in BUILTIN_BACKENDS if n not in NOT_BY_DEFAULT]
    unknown = [n for n in chosen if n not in BUILTIN_BACKENDS]
    if unknown:
        return [], False, f"unknown backend {unknown[0]!r} (built in: {', '.join(BUILTIN_BACKENDS)})"
    reports, failed = [], False
    for name in chosen:
        try:
            load_backend(name)
        except BackendError as exc:
            print(f"dmlconform: leaving out {name}: {exc}", file=sys.stderr)
            continue
        report = runs_dir / name
        command = [sys.executable, "-m", "dmlconform.cli", "run", "--backend", name, "--seed", str(seed)]
        print(f"dmlconform: running {name} ({' '.join(command[2:])} --report {report})", flush=True)
        code = subprocess.call([*command, "--report", str(report)], env=os.environ.copy())
        if code not in (0, 1):  # 1: failures, which the table shows; anything else: no whole run
            print(f"dmlconform: the {name} run ended with exit status {code}", file=sys.stderr)
            failed = True
        if (report / "results.json").is_file():
            reports.append(report)
    return reports, failed, None


def _write(loaded: list, out: Path, html_out: Path, command: str, extra: list[dict]) -> None:
    from dmlconform.report.implementations import column, render_html, render_markdown
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    short = {op.name: op.short_name or op.name for op in spec.operators.values()}
    columns = [column(_label(r), r) for r in loaded]
    findings = {c.label: _findings_of(c.results, extra) for c in columns}
    base = os.path.relpath(Path.cwd(), out.resolve().parent).replace(os.sep, "/") + "/"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(columns, findings, short, command, base), encoding="utf-8")
    html_out.write_text(render_html(columns, findings, short, command, base), encoding="utf-8")


def _label(results) -> str:
    """A column's name: the backend's, with the release for DirectML (its runs differ by it)."""
    name = results.backend_name
    release = results.versions.get("directml")
    return f"{name} {str(release).split('+')[0]}" if release else name


def _findings_entries(path: Path) -> list[dict]:
    """The entries of a findings file; ValueError with one line where it cannot be read."""
    import yaml

    from dmlconform.specification.yaml_text import load_yaml

    where = str(path)
    if not path.is_file():
        raise ValueError(f"{where}: no such file")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), yaml.SafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: not YAML ({str(exc).splitlines()[0]})") from None
    if not (isinstance(data, dict) and isinstance(data.get("findings"), list)):
        raise ValueError(f"{where}: no 'findings' list")
    return [f for f in data["findings"] if isinstance(f, dict) and "id" in f]


def _findings_of(results, extra: list[dict]) -> dict:
    """What the backend's known-findings file, then the ``--findings`` files, say of each finding:
    reason, explained, reproducer (a finding's first entry states it; the others extend it)."""
    from dmlconform.report.implementations import FindingInfo
    from dmlconform.runner.expect import known_findings_file

    shipped = known_findings_file(results.backend_name)
    found: dict[str, FindingInfo] = {}
    for f in (_findings_entries(shipped) if shipped is not None else []) + extra:
        found.setdefault(
            str(f["id"]), FindingInfo(str(f.get("reason", "")), f.get("explained"), f.get("reproducer"))
        )
    return found
