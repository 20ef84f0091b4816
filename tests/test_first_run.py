"""A first run as a new user makes it: the README's backend recipe in ./mybackend.py, run with the
installed `dmlconform` command (whose sys.path starts at its own bin directory, not the current
one), replayed the same way; and a normal run that emits no numpy RuntimeWarning."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import REPO, SMALL, dmlconform

MYBACKEND = textwrap.dedent(
    '''
    import numpy as np
    import dmlconform as dc


    class MyBackend:
        name = "mine"
        feature_level = "5_2"

        def __init__(self, **options):
            self.options = options

        def execute(self, desc, inputs):
            return dc.execute(desc, inputs)


    class Buggy(MyBackend):
        """Right on FLOAT32, 3% too large on FLOAT16."""

        def execute(self, desc, inputs):
            out = super().execute(desc, inputs)
            return {k: (v * 1.03).astype(v.dtype) if v.dtype == np.float16 else v for k, v in out.items()}
    '''
)


def console_script(tmp_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI the way an installed console script does: from a script file in another
    directory, so that the current directory is not on sys.path by itself."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "dmlconform"
    script.write_text("import sys\nfrom dmlconform.cli import main\nsys.exit(main())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_backend_in_the_current_directory_runs_and_replays(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mybackend.py").write_text(MYBACKEND)
    ok = console_script(
        tmp_path, "run", "--backend", "mybackend:MyBackend", *SMALL, "--report", "r", cwd=project
    )
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "cannot import" not in ok.stderr and " passed, 0 failed" in ok.stdout

    bad = console_script(
        tmp_path, "run", "--backend", "mybackend:Buggy", *SMALL, "--kinds", "numeric", "--report", "b",
        cwd=project,
    )  # fmt: skip
    assert bad.returncode == 1, bad.stdout[-2000:] + bad.stderr[-2000:]
    (case_dir, *_) = sorted((project / "b" / "failures").iterdir())
    # replay (default: the saved backend, mybackend:Buggy), in process and in an isolated worker.
    for extra in ([], ["--isolate"]):
        again = console_script(tmp_path, "replay", str(case_dir), *extra, cwd=project)
        assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
        assert "cannot import" not in again.stderr and "ULP" in again.stdout
    isolated = console_script(
        tmp_path, "run", "--backend", "mybackend:MyBackend", *SMALL, "--kinds", "numeric", "--isolate",
        "--report", "i", cwd=project,
    )  # fmt: skip
    assert isolated.returncode == 0, isolated.stdout[-2000:] + isolated.stderr[-2000:]


def test_unknown_module_in_the_current_directory_is_one_line(tmp_path: Path) -> None:
    proc = console_script(tmp_path, "run", "--backend", "nosuchmodule:X", *SMALL, cwd=tmp_path)
    assert proc.returncode == 2 and "cannot import nosuchmodule" in proc.stderr
    assert "Traceback" not in proc.stderr


# Every location must be silent (the reference's FLOAT16 casts included).
ELSEWHERE: tuple[str, ...] = ()


def test_a_normal_run_emits_no_runtime_warning(tmp_path: Path) -> None:
    """FLOAT16 numeric cases of every operator and level (three a group, the sizes to 2 x 65537:
    the compiled judge's path as well as numpy's), which include the data regime whose
    squares overflow FLOAT16 and outputs beyond its range: expected overflow is handled where it
    happens (np.errstate at the cast), so pytest's warnings summary names no RuntimeWarning."""
    proc = dmlconform(
        "run", "--backend", "numpy", "--dtypes", "FLOAT16", "--kinds", "numeric", "--cases", "3",
        "--max-elements", "140000", "--report", "r",
        "--", "-W", "always::RuntimeWarning", "-p", "no:randomly",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    where = re.findall(r"^\s*(\S+):\d+: RuntimeWarning", proc.stdout, re.M)
    assert len(where) == len(re.findall(r": RuntimeWarning", proc.stdout))  # every one is located
    stray = [w for w in where if not any(part in w.replace(os.sep, "/") for part in ELSEWHERE)]
    assert stray == [], proc.stdout[-3000:]
