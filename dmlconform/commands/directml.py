"""``dmlconform directml setup | info | versions``: the DirectML stack under Wine.

``setup`` installs or prepares every piece (idempotent, each step says what it did and how long
it took) and ends with the self-test, because DirectML's S_OK proves nothing on a broken stack.
``info`` prints the same account without changing anything; ``versions`` lists the installed
releases. Exit codes: 0 ok, 1 the self-test failed, 2 a piece is missing or cannot be had.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "directml",
        help="set up and inspect the real DirectML under Wine",
        description="Set up (setup), inspect (info) and list (versions) the real DirectML.dll running under "
        "Wine, vkd3d and lavapipe on this machine, for 'dmlconform run --backend directml'. Exit status: "
        "that of the action.",
    )
    verbs = p.add_subparsers(dest="directml_verb", metavar="setup|info|versions", required=True)
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
        help="DirectML release to install (repeatable; default 1.15.4; 'all' for every release that runs here)",
    )
    setup_p.set_defaults(run=run_setup)
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
    versions_p = verbs.add_parser(
        "versions",
        help="list known DirectML releases and what is installed",
        description="List the DirectML releases setup knows (the wheel each comes from, its maximum "
        "feature level, whether it is installed and whether it runs under this stack). Exit status: 0.",
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
        return [r.dml_version for r in RELEASES if r.runs_here]
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
    status = 0
    for v in versions:
        status = max(status, _report(v, None, "setup"))
    print(f"setup finished in {time.monotonic() - start:.1f} s")
    return status


def run_info(args: argparse.Namespace) -> int:
    return _report(args.version, args.dll, "info")


def _report(version: str | None, dll: str | None, action: str) -> int:
    """Start a runner on the stack, print what DirectML says of itself, run the self-test."""
    from dmlconform.backends.directml import stack
    from dmlconform.backends.directml.backend import account
    from dmlconform.backends.directml.client import RunnerError
    from dmlconform.spec import load_spec

    try:
        found = stack.locate(version, dll)
    except stack.StackMissing as exc:
        return _err(str(exc), action)
    try:
        with stack.Session(found) as session:
            info, test = account(session, load_spec())
    except (RunnerError, OSError, RuntimeError) as exc:
        return _err(f"the runner did not start: {exc}", action)
    print(f"DirectML {info['directml']}")
    for key in ("max_feature_level", "float16", "adapter", "vulkan_driver", "vkd3d", "wine", "directml_dll"):
        print(f"  {key.replace('_', ' '):<18} {info.get(key, '?')}")
    print(f"  {'self-test':<18} {'passed' if test.passed else 'FAILED'}: {test.detail}")
    return 0 if test.passed else 1


def run_versions(args: argparse.Namespace) -> int:
    from dmlconform.backends.directml import provision
    from dmlconform.backends.directml.releases import RELEASES

    home = provision.home()
    print(f"{'DirectML':<9} {'wheel':<30} {'max FL':<7} {'installed':<10} here")
    for r in RELEASES:
        dll = home / "dll" / r.dml_version / "DirectML.dll"
        wheel = f"{r.package}=={r.package_version}"
        status = "runs" if r.runs_here else f"does not run: {r.note}"
        print(
            f"{r.dml_version:<9} {wheel:<30} {r.max_feature_level or '-':<7} {'yes' if dll.is_file() else 'no':<10} {status}"
        )
    return 0
