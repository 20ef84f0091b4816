"""``dmlconform dxdispatch export|check|emulate``: run the suite's cases on real DirectML.

``export DIR`` writes the cases a ``run`` would run (same selection options, same input data) as
DxDispatch models plus run scripts; the directory is copied to a Windows (or WSL) machine and run
there with DxDispatch; ``check DIR`` judges what came back and writes the standard report;
``emulate DIR --backend NAME`` plays DxDispatch locally on any backend (CI, or replaying a bundle).
See ``dmlconform/dxdispatch/`` and ``docs/dxdispatch.md``.

Exit status: 0 ok (for emulate: the bundle was played, refusals included), 1 a case failed or
errored (check), 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dmlconform.cli import add_spec_dir
from dmlconform.runner.directories import directory_problem
from dmlconform.runner.options import add_arguments, command_line, given
from dmlconform.runner.selection import resolve_selection, spec_level


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dxdispatch",
        help="export cases for DxDispatch (real DirectML), check its outputs, or emulate it",
        description="Run the conformance cases on real DirectML through DxDispatch: export a bundle, run its "
        "script on Windows/WSL, check the outputs. 'emulate' plays DxDispatch locally on any backend. "
        "Exit status: that of the action; 2 without one.",
    )
    sub = p.add_subparsers(dest="dxdispatch_verb", metavar="ACTION")
    _register_export(sub)
    _register_check(sub)
    _register_emulate(sub)
    p.set_defaults(run=lambda args: _usage(p))


def _register_export(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "export",
        help="write the selected cases as DxDispatch models and run scripts",
        description="Write the cases a 'run' with the same selection options would run (same ids, same "
        "input data) as DxDispatch models, with the run scripts and a manifest, into a bundle directory "
        "to copy to a Windows or WSL machine. Exit status: 0 written, 2 unusable options or directory.",
    )
    e.add_argument("dir", metavar="DIR", help="bundle directory to write (must be empty or absent)")
    add_arguments(e, "export")  # the selection options of run, from runner/options.py
    e.add_argument("--force", action="store_true", help="write into a directory that is not empty")
    add_spec_dir(e)
    e.set_defaults(run=run_export)


def _register_check(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "check",
        help="judge a bundle DxDispatch has run and write the report",
        description="Judge what DxDispatch wrote into a bundle with the suite's tolerance and verdicts, "
        "and write the standard report (results.json, junit.xml, summary.md, index.html). A bundle "
        "none of whose cases ran is refused. Exit status: 0 every case passed or was skipped, 1 a case "
        "failed or errored, 2 unusable bundle or options.",
    )
    c.add_argument("dir", metavar="DIR", help="the bundle directory, with DxDispatch's outputs in it")
    c.add_argument("--report", metavar="R", help="report directory (default DIR/report)")
    c.add_argument(
        "--directml-version",
        metavar="X.Y.Z",
        help="DirectML release that ran it, e.g. 1.15.4 (default: what the run script recorded from "
        "dxdispatch -S)",
    )
    c.add_argument(
        "-l", "--feature-level", metavar="FL", help="judge acceptance at this level (default: the version's)"
    )
    add_spec_dir(c)
    c.set_defaults(run=run_check)


def _register_emulate(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser(
        "emulate",
        help="run a bundle as DxDispatch would, on a dmlconform backend",
        description="Play DxDispatch locally: read each model as strictly as DxDispatch does, refuse to "
        "create what the backend's check rejects (or the validator, for a backend that does not "
        "validate), dispatch through the backend and write the outputs and logs a real run would. "
        "Exit status: 0 played (refusals included), 2 unusable bundle or backend.",
    )
    m.add_argument("dir", metavar="DIR", help="the bundle directory")
    add_arguments(m, "emulate")
    add_spec_dir(m)
    m.set_defaults(run=run_emulate)


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def _err(action: str, message: str) -> int:
    print(f"dmlconform dxdispatch {action}: error: {message}", file=sys.stderr)
    return 2


def _spec(args: argparse.Namespace):  # -> Spec
    import os

    from dmlconform.specification.spec import load_spec

    if args.spec_dir:
        os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
        return load_spec(Path(args.spec_dir))
    return load_spec()


def _command(args: argparse.Namespace, action: str) -> str:
    """The command line that reproduces this call (for results.json and the manifest)."""
    words = ["dmlconform", "dxdispatch", action, str(args.dir)]
    for name in ("report", "directml_version"):  # check's own options
        if getattr(args, name, None) is not None:
            words += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    if action == "check" and args.feature_level is not None:
        words += ["--feature-level", args.feature_level]
    return command_line(words, args, action)


def build_selection(args: argparse.Namespace, spec):  # -> Selection
    """The same Selection a run builds from the same options (SettingsError with one line); the
    level defaults to the spec's highest, and validation cases are always exported."""
    level = spec_level(spec, args.feature_level) or spec.levels[-1]
    return resolve_selection(spec, given(args, "export"), level)


def run_export(args: argparse.Namespace) -> int:
    from dmlconform.dxdispatch.bundle import ADAPTERS, DEPENDENCIES, MANIFEST, export_bundle, stderr_progress

    spec = _spec(args)
    try:
        sel = build_selection(args, spec)
    except ValueError as exc:
        return _err("export", str(exc))
    root = Path(args.dir)
    if root.exists() and not root.is_dir():
        return _err("export", f"{root} is not a directory")
    if root.is_dir() and any(root.iterdir()) and not args.force and not (root / MANIFEST).is_file():
        return _err("export", f"{root} is not empty (use --force to write into it)")
    if (root / MANIFEST).is_file() and not args.force:
        return _err("export", f"{root} already holds a bundle (use --force to overwrite it)")
    if args.force and (root / MANIFEST).is_file():
        import shutil

        shutil.rmtree(root / "cases", ignore_errors=True)  # a bundle of ours: no stale cases or outputs
        shutil.rmtree(root / "report", ignore_errors=True)
        for name in (DEPENDENCIES, ADAPTERS):
            (root / name).unlink(missing_ok=True)
    t0 = time.monotonic()
    stderr_progress("generating cases (first use compiles the reference kernels, this can take a while)")
    manifest = export_bundle(root, spec, sel, _command(args, "export"), stderr_progress)
    counts: dict[str, int] = {}
    for e in manifest["cases"]:
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(
        f"dmlconform: bundle {root}: {len(manifest['cases'])} cases ({summary}), "
        f"{size / 1e6:.1f} MB, {time.monotonic() - t0:.1f} s"
    )
    print(
        f"dmlconform: copy it to the DirectML machine, run run_dxdispatch.ps1 (or .sh), then: dmlconform dxdispatch check {root}"
    )
    return 0


def run_check(args: argparse.Namespace) -> int:
    from dmlconform.dxdispatch.bundle import BundleError, load_manifest, stderr_progress
    from dmlconform.dxdispatch.check import check_bundle, never_run, read_run_info
    from dmlconform.runner.results import spec_hash
    from dmlconform.specification.spec import UnknownLevel

    spec = _spec(args)
    root = Path(args.dir)
    version_problem = _directml_version_problem(args, spec)
    if version_problem:
        return _err("check", version_problem)
    try:
        manifest = load_manifest(root)
        level = spec.level(args.feature_level) if args.feature_level else None
        run_info = read_run_info(root, spec, args.directml_version, level)
    except BundleError as exc:
        return _err("check", str(exc))
    except UnknownLevel as exc:
        return _err("check", str(exc))
    not_run = never_run(root, manifest)
    if not_run:
        return _err("check", not_run)
    report_problem = directory_problem(Path(args.report) if args.report else root / "report", "--report")
    if report_problem:
        return _err("check", report_problem)
    if manifest.get("spec_hash") != spec_hash(spec):
        stderr_progress("warning: the bundle was exported with another spec; cases are judged with this one")
    if run_info.note:
        stderr_progress(f"warning: {run_info.note}")
    report_dir = Path(args.report) if args.report else root / "report"
    t0 = time.monotonic()
    results = check_bundle(
        root, manifest, spec, report_dir, _command(args, "check"), run_info, stderr_progress
    )
    s = results["summary"]
    print(
        "dmlconform: {total} cases: {passed} passed, {failed} failed, {skipped} skipped, {errors} errors".format(
            **s
        )
        + f" (DirectML {run_info.version or 'unknown'}, feature level {run_info.level.name if run_info.level else 'unknown'}, "
        f"{time.monotonic() - t0:.1f} s)"
    )
    print(f"dmlconform: results in {report_dir}")
    return 1 if s["failed"] or s["errors"] else 0


def _directml_version_problem(args: argparse.Namespace, spec) -> str | None:  # spec: Spec
    """Why ``--directml-version`` cannot be used (None: absent, or a release the check can judge
    at): it must be a DirectML version, X.Y.Z, and without ``--feature-level`` one of the 1.x
    line, whose feature level the spec's table gives."""
    import re

    from dmlconform.dxdispatch.check import level_for_version

    version = args.directml_version
    if version is None:
        return None
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version.strip()):
        return f"--directml-version {version!r} is not a DirectML version (X.Y.Z, e.g. 1.15.4)"
    if args.feature_level is None and level_for_version(version, spec) is None:
        return (
            f"--directml-version {version}: no feature level is known for it (DirectML releases are "
            "1.x; a Windows build number is not one): pass the release, or --feature-level too"
        )
    return None


def run_emulate(args: argparse.Namespace) -> int:
    from dmlconform.dxdispatch.bundle import BundleError, load_manifest, stderr_progress
    from dmlconform.dxdispatch.emulate import emulate_bundle, load_emulator
    from dmlconform.runner.options import parse_pairs
    from dmlconform.specification.spec import UnknownLevel

    spec = _spec(args)
    root = Path(args.dir)
    try:
        load_manifest(root)
        options = parse_pairs(args.backend_option)
        level = spec.level(args.feature_level) if args.feature_level else None
        em = load_emulator(args.backend, options, level, spec)
    except (BundleError, UnknownLevel, ValueError) as exc:
        return _err("emulate", str(exc))
    t0 = time.monotonic()
    counts = emulate_bundle(root, em, stderr_progress)
    print(
        f"dmlconform: emulated DxDispatch on {em.label}: {counts['ok']} cases ran, {counts['failed']} "
        f"exited with an error ({time.monotonic() - t0:.1f} s); now: dmlconform dxdispatch check {root}"
    )
    return 0
