"""``dmlconform directml setup | info | versions``: the DirectML stack under Wine.

``setup`` installs or prepares every piece (idempotent, each step says what it did and how long
it took) and ends with the self-test, because DirectML's S_OK proves nothing on a broken stack.
``info`` prints the same account without changing anything but the release's status record;
``versions`` lists the known releases, what is installed, each one's maximum feature level and
whether it runs here, as its self-test found (``status.py``). Exit codes: 0 ok, 1 the self-test
failed, 2 a piece is missing or cannot be had.

A release that cannot run on this stack (1.5.1 crashes, 1.10.1 records nothing) is found by its
self-test, recorded and reported as such; ``setup --version all`` installs and checks every
release of the table and fails only when a release the table expects to run does not.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stack loads when a verb runs, not when the parsers are built
    from dmlconform.backends.directml.stack import Stack


def register(sub: Any) -> None:
    p = sub.add_parser(
        "directml",
        help="set up and inspect the real DirectML under Wine",
        description="Set up (setup), inspect (info), list (versions), probe acceptance (accept), sweep releases (sweep) and publish (publish) the real DirectML.dll running under "
        "Wine, vkd3d and lavapipe on this machine, for 'dmlconform run --backend directml'. Exit status: "
        "that of the action.",
    )
    verbs = p.add_subparsers(
        dest="directml_verb", metavar="setup|info|versions|accept|sweep|publish", required=True
    )
    _register_setup(verbs)
    _register_info(verbs)
    _register_versions(verbs)
    from dmlconform.commands import directml_releases

    directml_releases.register(verbs)


def _register_setup(verbs: Any) -> None:
    setup_p = verbs.add_parser(
        "setup",
        help="install Wine, lavapipe, DirectML.dll and the runner; self-test",
        description="Install or prepare every piece of the stack, idempotently, under one cache directory "
        "($XDG_CACHE_HOME/dmlconform/directml or $DMLCONFORM_DIRECTML_HOME): Debian's Wine, Xvfb, Vulkan "
        "loader and mingw-w64 (apt; not root: it prints the apt-get line and stops), lavapipe, "
        "DirectML.dll, a Wine prefix and the runner; then the self-test on known data. Exit status: 0 "
        "ready, 1 the self-test failed, 2 a piece is missing or cannot be had.",
    )
    setup_p.add_argument(
        "--version",
        action="append",
        metavar="V",
        help="DirectML release to install and self-test (repeatable; default 1.15.4; 'all' for every release)",
    )
    setup_p.set_defaults(run=run_setup)


def _register_info(verbs: Any) -> None:
    info_p = verbs.add_parser(
        "info",
        help="print the installed stack and self-test it, changing nothing",
        description="Print what DirectML reports of itself on the installed stack (release, maximum feature "
        "level, FLOAT16, adapter, Vulkan driver, Wine, vkd3d) and run the self-test, changing nothing. "
        "Exit status: 0 the self-test passed, 1 it failed, 2 a piece is missing.",
    )
    info_p.add_argument("--version", metavar="V", help="DirectML release (default 1.15.4)")
    info_p.add_argument("--dll", metavar="PATH", help="a DirectML.dll to inspect instead (default: none)")
    info_p.set_defaults(run=run_info)


def _register_versions(verbs: Any) -> None:
    versions_p = verbs.add_parser(
        "versions",
        help="list known DirectML releases and what is installed",
        description="List the DirectML releases setup knows (the wheel each comes from, its maximum "
        "feature level, whether it is installed and whether it runs under this stack). Exit status: 0.",
    )
    versions_p.add_argument(
        "--check",
        action="store_true",
        help="self-test every installed release now: start its runner, read the feature level DirectML "
        "reports and run one operator on known data against the reference (default: show the last "
        "recorded self-test)",
    )
    versions_p.set_defaults(run=run_versions)


def _err(message: str, action: str) -> int:
    print(f"dmlconform directml {action}: error: {message}", file=sys.stderr)
    return 2


def _step(name: str, fn: Any, *args: Any) -> Any:
    start = time.monotonic()
    result = fn(*args)
    print(
        f"  {name:<10} {time.monotonic() - start:6.1f} s  {result if isinstance(result, str) else ''}".rstrip()
    )
    return result


def _setup_versions(requested: list[str] | None) -> list[str]:
    from dmlconform.backends.directml.releases import DEFAULT_DML_VERSION, RELEASES, release

    if not requested:
        return [DEFAULT_DML_VERSION]
    if "all" in requested:
        return [r.dml_version for r in RELEASES]
    for v in requested:
        release(v)  # KeyError naming the known versions
    return list(dict.fromkeys(requested))


def run_setup(args: argparse.Namespace) -> int:
    from dmlconform.backends.directml import provision, stack

    try:
        versions = _setup_versions(args.version)
    except KeyError as exc:
        return _err(str(exc).strip("'\""), "setup")
    start = time.monotonic()
    print(f"dmlconform directml setup: home {provision.home()}")
    try:
        installed = _step("system", provision.install_system_pieces, print)
        if installed:
            print(f"             installed {' '.join(installed)}")
        _step("lavapipe", lambda: str(provision.ensure_lavapipe(print)))
        for v in versions:
            _step(f"DirectML {v}", lambda v=v: str(provision.ensure_dll(v, print)))
        _step("prefix", lambda: str(provision.ensure_prefix(print)))
        _step("runner", lambda: str(stack.build_runner(print)))
    except provision.ProvisionError as exc:
        return _err(str(exc), "setup")
    from dmlconform.backends.directml.releases import release

    status = 0
    for v in versions:
        code = _report(v, None, "setup")
        # 'all' includes the releases the table already knows cannot run here: reported, not failed
        expected_to_fail = "all" in (args.version or []) and not release(v).runs_here
        status = max(status, 0 if code == 1 and expected_to_fail else code)
    print(f"setup finished in {time.monotonic() - start:.1f} s")
    return status


def run_info(args: argparse.Namespace) -> int:
    return _report(args.version, args.dll, "info")


def _report(version: str | None, dll: str | None, action: str) -> int:
    """Start a runner on the stack, print what DirectML says of itself, run the self-test; for
    an installed release (not ``--dll``), record the outcome as that release's status."""
    from dmlconform.backends.directml import stack, status
    from dmlconform.backends.directml.backend import account
    from dmlconform.backends.directml.client import RunnerError
    from dmlconform.backends.directml.releases import DEFAULT_DML_VERSION
    from dmlconform.specification.spec import load_spec

    try:
        found = stack.locate(version, dll)
    except stack.StackMissing as exc:
        return _err(str(exc), action)
    record = None if dll else (version or DEFAULT_DML_VERSION)
    runner, lavapipe = status.current_stack()
    try:
        with stack.Session(found) as session:
            info, test = account(session, load_spec())
    except (RunnerError, OSError, RuntimeError) as exc:
        if record:
            return _runner_did_not_start(record, found, exc, runner, lavapipe)
        return _err(f"the runner did not start: {exc}", action)
    _print_account(info)
    passed = test.passed and bool(info.get("max_feature_level"))
    if record:
        status.write(
            status.Status(
                record,
                passed,
                ("self-test passed: " if passed else "self-test failed: ") + test.detail,
                file_version=info["directml"],
                max_feature_level=info.get("max_feature_level", ""),
                float16=info.get("float16", ""),
                runner=runner,
                lavapipe=lavapipe,
            )
        )
    verdict = "passed" if passed else "FAILED (cannot run here)"
    print(f"  {'self-test':<18} {verdict}: {test.detail}")
    return 0 if passed else 1


def _runner_did_not_start(record: str, found: Stack, exc: Exception, runner: str, lavapipe: str) -> int:
    """Record and print that the release cannot run here: its runner did not start (exit 1)."""
    from dmlconform.backends.directml import status

    status.write(
        status.Status(
            record,
            False,
            f"the runner did not start: {exc}",
            file_version=_file_version(found),
            runner=runner,
            lavapipe=lavapipe,
        )
    )
    print(
        f"DirectML {_file_version(found)}\n  {'self-test':<18} cannot run here: the runner did not start: {exc}"
    )
    return 1


def _print_account(info: dict[str, Any]) -> None:
    """What DirectML says of itself on this stack, one line a fact."""
    print(f"DirectML {info['directml']}")
    for key in (
        "max_feature_level",
        "float16",
        "wave_ops",
        "adapter",
        "vulkan_driver",
        "vkd3d",
        "wine",
        "directml_dll",
    ):
        print(f"  {key.replace('_', ' '):<18} {info.get(key, '?')}")


def _file_version(found: Any) -> str:
    from dmlconform.backends.directml import provision

    try:
        return found.file_version()
    except provision.ProvisionError as exc:
        return f"unknown ({exc})"


def run_versions(args: argparse.Namespace) -> int:
    """One line per known release: its wheel, the maximum feature level DirectML reported (the
    table's, marked ``?``, before a self-test), whether it is installed, and whether it runs here
    as its recorded self-test found (``--check`` measures again)."""
    from dmlconform.backends.directml import status
    from dmlconform.backends.directml.releases import RELEASES
    from dmlconform.backends.directml.stack import StackMissing
    from dmlconform.specification.spec import load_spec

    print(f"{'DirectML':<9} {'wheel':<30} {'max FL':<7} {'installed':<10} status on this stack")
    runnable = 0
    for r in RELEASES:
        wheel = f"{r.package}=={r.package_version}"
        here = status.installed(r.dml_version)
        record = status.read(r.dml_version) if here else None
        if here and args.check:
            try:
                record = status.measure(r.dml_version, load_spec())
            except StackMissing as exc:
                return _err(str(exc), "versions")
            status.write(record)
        if record is None:
            level = f"{r.max_feature_level}?" if r.max_feature_level else "-"
            text = (
                "not installed"
                if not here
                else f"not checked: run dmlconform directml info --version {r.dml_version}"
            )
        else:
            level = record.max_feature_level or "-"
            text = ("runs: " if record.runs else "cannot run here: ") + record.detail
            if status.stale(record):
                text += " (measured on another runner or lavapipe: --check)"
            runnable += record.runs
        print(f"{r.dml_version:<9} {wheel:<30} {level:<7} {'yes' if here else 'no':<10} {text}")
    print(f"{runnable} release(s) run here")
    return 0
