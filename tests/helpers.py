"""What the test modules share: paths, the small run selection, the spec, the CLI in a subprocess,
the plugin in-process, and desc builders. One place, so that no test module imports another
(a test module imported by another runs its module-level code twice and couples their edits).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dmlconform.runner.judging import reference_outputs
from dmlconform.specification.desc import OperatorDesc, parse_desc
from dmlconform.specification.spec import load_spec
from dmlconform.tolerance.compare import compare
from dmlconform.tolerance.options import ToleranceOptions

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/: the test backends load from here
REPO = Path(HERE).parent
SPEC = load_spec()
MVN1 = "MEAN_VARIANCE_NORMALIZATION1"
#: A run small enough for a subprocess test: one operator, its first level, two cases a group.
SMALL = ["--operators", MVN1, "--feature-level", "2_1", "--cases", "2"]
SMALL += ["--tier", "smoke"]  # the same seeded cases as the default tier here, without its size cases
#: A numpy run long enough to interrupt (about 1000 cases of one operator) that collects in a second.
LONG = ["--backend", "numpy", "--operators", MVN1, "--cases", "32"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), HERE, env.get("PYTHONPATH", "")])
    return env


def dmlconform(
    *args: str, cwd: Path, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``dmlconform ARGS`` in a subprocess started in ``cwd``, as a user runs it (``preexec_fn``:
    run in the child first, e.g. to cap its memory)."""
    return subprocess.run(
        [sys.executable, "-m", "dmlconform.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=preexec_fn,
    )


def start_run(*args: str, cwd: Path, new_group: bool = False) -> subprocess.Popen[str]:
    """``dmlconform run ARGS`` started in the background, its output on one pipe."""
    env = _env()
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "dmlconform.cli", "run", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_as_from_a_shell,
        start_new_session=new_group,
    )


def _as_from_a_shell() -> None:
    """Start the run with SIGINT as a shell gives it (default handling, unblocked), whatever the
    test process has: an ignored signal stays ignored across exec, and in full ``-n 2`` runs the
    pytest-xdist worker running this test had SIGINT set to SIG_IGN (seen with
    signal.getsignal), so the run ignored the Ctrl-C below and went on to the end."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_until(proc: subprocess.Popen[str], passed: int, timeout: float = 300) -> list[str]:
    """Read the run's output until pytest has printed ``passed`` progress dots; returns the output
    read so far (the reading goes on in a thread, so the pipe never fills)."""
    out: list[str] = []
    seen = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        tail, started, dots = "", False, 0
        while True:
            ch = proc.stdout.read(1)
            if not ch:
                seen.set()
                return
            out.append(ch)
            tail = (tail + ch)[-40:]
            started = started or tail.endswith("test_conformance.py ")  # the progress line
            dots += started and ch == "."
            if dots >= passed:
                seen.set()

    threading.Thread(target=reader, daemon=True).start()
    assert seen.wait(timeout), "".join(out)[-2000:]
    return out


def says_incomplete(report: Path, console: str | None, status: str, reason: str) -> dict[str, Any]:
    """Assert that every file of the run in ``report`` and its console (``dmlconform run``'s:
    None for plain pytest's, which has no last line of its own) say the run is incomplete, with
    ``status`` and ``reason`` (results.json's ``stop_reason``), and that a report of no case says
    no "passed"; returns results.json."""
    import json
    import xml.etree.ElementTree as ET

    from markupsafe import escape  # as the page's templates escape

    data = json.loads((report / "results.json").read_text())
    fields = {
        k: data.get(k) for k in ("complete", "status", "stop_reason", "exit_status", "collected", "ran")
    }
    assert (data["complete"], data["status"], data["stop_reason"]) == (False, status, reason), fields
    assert data["ran"] == len(data["cases"]) == data["summary"]["total"]
    summary = (report / "summary.md").read_text()
    assert summary.splitlines()[0].endswith(": INCOMPLETE RUN"), summary[:500]
    assert f"**Incomplete run ({status}): " in summary and f"Cause: {reason}." in summary, summary[:800]
    lines = summary.splitlines()
    banner = next(i for i, text in enumerate(lines) if text.startswith("> **Incomplete run"))
    assert lines[banner + 1] == "", summary[:800]  # else markdown reads the next paragraph into the quote
    page = (report / "index.html").read_text()
    assert "<title>INCOMPLETE " in page and f"Incomplete run ({status}): " in page
    assert f"Cause: {escape(reason)}." in page
    props = {p.get("name"): p.get("value") for p in ET.parse(report / "junit.xml").getroot().iter("property")}
    assert props["dmlconform_complete"] == "false" and props["dmlconform_status"] == status
    assert props["dmlconform_stop_reason"] == reason
    if not data["cases"]:
        assert "passed" not in summary and "No case ran" in summary
        assert 'id="none-ran"' in page
    if console is not None:
        of = f" of {data['collected']}" if data["collected"] is not None else ""
        line = f"dmlconform: INCOMPLETE RUN ({status}): {reason}, {data['ran']}{of} cases ran; report written to {report}"
        assert line in console.splitlines(), console[-3000:]
    return data


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The conformance suite in-process (pytester), the test backends importable."""
    from dmlconform.runner.plugin import plugin_args

    pytester.syspathinsert(HERE)
    # (no:benchmark: pytest-benchmark warns in every in-process run under xdist)
    return pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-p", "no:benchmark", *args)


@contextlib.contextmanager
def reference_path(which: str) -> Iterator[None]:
    """Force the reference's numba kernel ("numba") or its numpy mirror ("mirror") whatever the size."""
    from dmlconform import reference

    before = reference.MIRROR_MAX_ELEMENTS
    reference.MIRROR_MAX_ELEMENTS = -1 if which == "numba" else 1 << 62
    try:
        yield
    finally:
        reference.MIRROR_MAX_ELEMENTS = before


def mvn1_body(
    sizes: list[int] | None = None, axes: list[int] | None = None, dtype: str = "FLOAT32", **members: Any
) -> dict[str, Any]:
    """The body of a legal MVN1 desc: packed ``dtype`` tensors of ``sizes`` (default {2, 3, 4, 5}),
    ``axes`` (default {2, 3}), NormalizeVariance; ``members`` added or replaced (``...`` removes one)."""
    t = {"DataType": dtype, "Sizes": list(sizes or [2, 3, 4, 5])}
    body: dict[str, Any] = {
        "InputTensor": t,
        "OutputTensor": dict(t),
        "Axes": list(axes if axes is not None else [2, 3]),
    }
    body["NormalizeVariance"] = True
    for key, value in members.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def mvn1_json(
    sizes: list[int] | None = None, axes: list[int] | None = None, dtype: str = "FLOAT32", **members: Any
) -> dict[str, Any]:
    """An MVN1 desc as JSON (``{"type": ..., "desc": ...}``): see :func:`mvn1_body`."""
    return {"type": MVN1, "desc": mvn1_body(sizes, axes, dtype, **members)}


def mvn1(
    sizes: list[int] | None = None, axes: list[int] | None = None, dtype: str = "FLOAT32", **members: Any
) -> OperatorDesc:
    """An MVN1 OperatorDesc: see :func:`mvn1_body`."""
    return parse_desc(mvn1_json(sizes, axes, dtype, **members))


def centred_case(name: str, n: int, dtype: str, regime: str, seed: int) -> tuple[OperatorDesc, dict]:
    """MVN1 over three slices with Scale, Bias and a FusedAdd as large as the input, or BNT over
    four channels with its statistics outputs, and its drawn inputs: the compiled judge's
    centred cases in the judge's tests."""
    from dmlconform.generation import data

    t = {"DataType": dtype, "Sizes": [3, n]}
    if name == "MVN1":
        body = {"InputTensor": t, "OutputTensor": t, "ScaleTensor": {"DataType": dtype, "Sizes": [1, n]},
                "BiasTensor": {"DataType": dtype, "Sizes": [3, 1]}, "Axes": [1], "NormalizeVariance": True}  # fmt: skip
        desc = parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": body})
    else:
        big, stat = {"DataType": dtype, "Sizes": [2, 4, n // 2]}, {"DataType": dtype, "Sizes": [1, 4, 1]}
        desc = parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": {
            "InputTensor": big, "ScaleTensor": stat, "BiasTensor": stat, "FusedAddTensor": big, "OutputTensor": big,
            "OutputMeanTensor": stat, "OutputVarianceTensor": stat, "Epsilon": 1e-5}})  # fmt: skip
    return desc, data.make_inputs(desc, regime, seed=seed, spec=SPEC)


def toward_zero16(v: np.ndarray) -> np.ndarray:
    """float32 values to FLOAT16 by truncation, as the DirectML stack converts (F6:
    cases/directml/float16-batch-norm)."""
    v = np.asarray(v, np.float32)
    h = v.astype(np.float16)
    over = np.abs(h.astype(np.float32)) > np.abs(v)
    return np.where(over, np.nextafter(h, np.float16(0)), h).astype(np.float16)


def judged_output(desc: OperatorDesc, inputs: dict, got: np.ndarray, tolerance: dict | None = None) -> Any:
    """The comparison of ``got`` as OutputTensor with the reference's, under ``tolerance``
    overrides (``{"model": "sequential"}``; None: the required model)."""
    ref = reference_outputs(desc, inputs, SPEC)["OutputTensor"]
    opts = ToleranceOptions.parse(tolerance)
    return compare(desc, {"OutputTensor": got}, {"OutputTensor": ref}, inputs, SPEC, opts)
