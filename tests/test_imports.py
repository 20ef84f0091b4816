"""Where an import may sit inside a function: only where it saves measured start-up time.

Three reasons keep a ``dmlconform`` import inside a function (docs/architecture.md):

- the CLI and what it loads to build its parsers (``cli.py``, ``commands/``,
  ``runner/options.py``, ``runner/selection.py``) and the pytest plugin (loaded by every pytest
  session through its entry point): each verb's work modules load when it runs; and the run's
  crash watcher (``runner/watch.py``), a process beside every run that imports the package only
  to write the report of a run that died;
- the imported module loads numba, jinja2 or an optional backend library at import (a run of
  small cases never imports numba);
- the import at the top would close a cycle of top-level imports.

Anything else is hoisted: this test names the one that is not.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dmlconform"
LAZY_BY_ROLE = (
    "dmlconform.cli",
    "dmlconform.commands.",
    "dmlconform.runner.options",
    "dmlconform.runner.selection",
    "dmlconform.runner.plugin",
    "dmlconform.runner.watch",
)
HEAVY_LIBRARIES = {"numba", "jinja2", "torch", "onnxruntime", "openvino", "jax", "hypothesis"}


@functools.cache
def modules() -> dict[str, ast.Module]:
    """Every module of the package, parsed on first use (at import, each worker's collection
    paid for it)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text())
    return out


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> set[str]:
    """The package modules an import statement loads (parent packages included)."""
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            pkg = importer if f"{importer}.__init__" in _inits() else importer.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                pkg = pkg.rsplit(".", 1)[0]
            base = f"{pkg}.{base}" if base else pkg
        names = [base, *(f"{base}.{a.name}" for a in node.names)]
    else:
        names = [a.name for a in node.names]
    out = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules())
    return out


@functools.cache
def _inits() -> set[str]:
    return {
        f"{n}.__init__" for n in modules() if (PACKAGE.parent / n.replace(".", "/") / "__init__.py").exists()
    }


def _top_level() -> tuple[dict[str, set[str]], set[str]]:
    """(module -> package modules it imports at top level, modules importing a heavy library)."""
    graph, heavy = {}, set()
    for name, tree in modules().items():
        edges: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(node, name)
                roots = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(r.split(".")[0] in HEAVY_LIBRARIES for r in roots):
                    heavy.add(name)
        graph[name] = edges - {name}
    return graph, heavy


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        m = stack.pop()
        if m not in seen:
            seen.add(m)
            stack.extend(graph[m])
    return seen


def _function_local(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            guarded = {id(n) for t in ast.walk(fn) if isinstance(t, ast.Try) for n in ast.walk(t)}
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in guarded:
                    found.append(node)
    return found


def test_every_function_local_import_saves_start_up_or_breaks_a_cycle():
    graph, heavy = _top_level()
    needless = []
    for name, tree in modules().items():
        if name.startswith(LAZY_BY_ROLE):
            continue
        for node in _function_local(tree):
            targets = _targets(node, name) - {p for p in modules() if name.startswith(p + ".")} - {name}
            if not targets:
                continue
            loads_heavy = any(_reach(graph, t) & heavy for t in targets)
            closes_cycle = any(name in _reach(graph, t) for t in targets)
            if not (loads_heavy or closes_cycle):
                needless.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not needless, "hoist these to the module's top:\n" + "\n".join(needless)


def test_the_cli_builds_its_parsers_without_the_work_modules():
    """``dmlconform --help`` loads the spec and the option tables, not the runner's cases,
    the backends, the tolerance or the report (those cost ~0.1 s of every verb's start-up)."""
    code = (
        "import sys\nfrom dmlconform.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('dmlconform')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.strip().splitlines()[-1]
    for work in (
        "dmlconform.runner.cases",
        "dmlconform.backends",
        "dmlconform.tolerance",
        "dmlconform.report",
    ):
        assert f"'{work}'" not in loaded, work
    assert "'dmlconform.runner.options'" in loaded  # the check above looked at the right process


def test_no_package_binds_a_name_its_submodule_will_overwrite():
    """``from dmlconform import kernels`` at the top of ``reference/__init__.py`` is replaced by
    the submodule ``reference.kernels`` the first time that loads (Python sets the package's
    attribute): the registry's functions then vanish mid-run."""
    clashes = []
    for name, tree in modules().items():
        if f"{name}.__init__" not in _inits():
            continue
        submodules = {
            m.rsplit(".", 1)[1]
            for m in modules()
            if m.startswith(name + ".") and m.count(".") == name.count(".") + 1
        }
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
                    if bound in submodules and module != name and not module.startswith(name + "."):
                        clashes.append(f"{name}: {ast.unparse(node)}")
    assert not clashes, clashes


#: what a kernel names by "module:function" rather than holding: the parts computed above the
#: kernels (the tolerance model, its compiled judge, the derivative relation's step)
ABOVE_THE_KERNELS = ("dmlconform.tolerance.",)


def test_a_kernel_holds_its_parts_or_names_the_tolerance_stage_above_it():
    """A part that is a function is the kernel package's own; a part named by a string lives in
    the tolerance stage (a part named in a module above that, the runner or a backend, would be
    an upward import made on first use where no import graph shows it)."""
    from dmlconform import kernels
    from dmlconform.kernels.registry import PARTS

    misplaced = []
    for k in kernels.KERNELS.values():
        for part in PARTS:
            ref = getattr(k, part)
            if isinstance(ref, str) and not ref.partition(":")[0].startswith(ABOVE_THE_KERNELS):
                misplaced.append(f"{k.name}.{part}: {ref}")
            elif callable(ref) and not ref.__module__.startswith("dmlconform.kernels."):
                misplaced.append(f"{k.name}.{part}: {ref.__module__}.{ref.__name__}")
    assert not misplaced, misplaced


def test_the_crash_watcher_waits_without_importing_the_package(tmp_path: Path) -> None:
    """Every run starts one: what it imports before the run ends competes with the run for the
    CPU, and the run's end waits for it (it imported the spec model, 0.3 s, until this test)."""
    from dmlconform.runner import watch

    done = subprocess.run(
        [sys.executable, "-X", "importtime", watch.__file__, str(tmp_path), "--isolate"],
        input=watch.DONE,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    imported = [ln.rsplit("|", 1)[-1].strip() for ln in done.stderr.decode().splitlines() if "|" in ln]
    assert "json" in imported and not [m for m in imported if m.startswith(("dmlconform", "numpy"))]
