"""The real DirectML.dll under Wine: the runner's pipe protocol, its recovery from hangs and
crashes, the self-test against a lavapipe that computes garbage, and ``--backend directml`` end
to end against the reference.

Needs the stack ``dmlconform directml setup`` installs; without it the module is skipped with
the one line ``stack.locate()`` gives. Runner processes are few: each xdist worker starts one
backend (its Xvfb and runner) for the whole module and the protocol tests talk to that runner;
the garbage-stack tests start one runner each, the CLI tests their own process.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import SPEC

from dmlconform.backends.directml.stack import Session, Stack, StackMissing, locate

try:
    STACK: Stack = locate()
except StackMissing as exc:
    pytest.skip(str(exc), allow_module_level=True)

from dmlconform import execute
from dmlconform.backends.base import BackendError, load_backend
from dmlconform.backends.directml import backend as backend_module
from dmlconform.backends.directml import pack
from dmlconform.backends.directml.client import (
    CMD_RUN,
    MODE_COMPILE,
    MODE_CREATE,
    MODE_EXECUTE,
    RunnerError,
    RunReply,
)
from dmlconform.backends.directml.releases import RELEASES
from dmlconform.backends.directml.selftest import run_self_test
from dmlconform.errors import Rejected, Unsupported
from dmlconform.generation.data import make_inputs, regimes_for
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import OperatorDesc, TensorDesc, parse_desc
from dmlconform.tolerance import compare
from dmlconform.tolerance.options import NO_OPTIONS

#: Debian bookworm's own lavapipe (mesa-vulkan-drivers 22.3.6): no VK_EXT_descriptor_indexing.
SYSTEM_ICD = Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
E_INVALIDARG = 0x80070057
STAGE_OK, STAGE_CREATE, STAGE_BAD_REQUEST = 0, 1, 6
FL_6_4, FL_6_3, FL_5_0, FL_4_0 = 0x6400, 0x6300, 0x5000, 0x4000  # DML_FEATURE_LEVEL_*
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    b = load_backend("directml")
    yield b
    b.close()


@pytest.fixture
def runner(backend: Any) -> Any:
    """The backend's own runner (no second process); a test that kills it leaves it restartable."""
    return backend.session.runner


def mvn1(
    out_strides: list[int] | None = None, data_type: str = "FLOAT32", axes: list[int] | None = None
) -> OperatorDesc:
    x = {"DataType": data_type, "Sizes": [1, 2, 2, 3]}
    y = dict(x) if out_strides is None else {**x, "Strides": out_strides}
    return parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": x,
                "OutputTensor": y,
                "Axes": axes or [2, 3],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )


X = (np.arange(12, dtype=np.float64).reshape(1, 2, 2, 3) ** 1.5 - 8).astype(np.float32)


def mvn_by_hand(x: np.ndarray, axes: tuple[int, ...] = (2, 3), eps: float = 1e-5) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def run(runner: Any, desc: OperatorDesc, mode: int, inputs: dict[str, np.ndarray] | None = None) -> RunReply:
    packed = pack.pack(desc, SPEC)
    buffers = pack.input_buffers(packed, desc, inputs or {"InputTensor": X})
    return runner.run(
        mode, packed.arena, packed.relocations, buffers, [s for _, s in packed.outputs], timeout=TIMEOUT
    )


def assert_serves(runner: Any) -> None:
    reply = run(runner, mvn1(), MODE_EXECUTE)
    assert reply.ok, reply.describe()
    got = pack.output_array(reply.outputs[0], mvn1().members["OutputTensor"])
    np.testing.assert_allclose(got, mvn_by_hand(X), rtol=0, atol=1e-5)


# --------------------------------------------------------------------------------------------
# The pipe protocol


def test_info_reports_feature_level_and_adapter(runner: Any) -> None:
    info = runner.info([FL_6_4, FL_6_3, FL_5_0], [1, 2], timeout=TIMEOUT)
    assert info["max_feature_level"] == "0x6400"
    assert info["adapter"] and info["adapter"] != "unknown"
    assert re.search(r"vendor 0x[0-9a-f]{4}", info["adapter"])
    assert info["data_type_1"] == "1"  # FLOAT32
    # one level at a time, highest first: the highest of those asked that DirectML supports
    assert runner.info([FL_5_0, FL_4_0], [], timeout=TIMEOUT)["max_feature_level"] == "0x5000"
    # a level this release does not know is passed over, not fatal
    assert runner.info([0x7000, FL_6_4], [], timeout=TIMEOUT)["max_feature_level"] == "0x6400"


def test_run_modes(runner: Any) -> None:
    desc = mvn1()
    size = pack.pack(desc, SPEC).outputs[0][1]
    assert size == 48

    create = run(runner, desc, MODE_CREATE)
    assert (create.stage, create.hresult) == (STAGE_OK, 0)
    assert create.outputs == [None]
    assert create.timings_ms[0] > 0 and create.timings_ms[1:] == (0.0, 0.0, 0.0, 0.0)

    compiled = run(runner, desc, MODE_COMPILE)
    assert (compiled.stage, compiled.hresult) == (STAGE_OK, 0)
    assert compiled.outputs == [None]
    assert compiled.timings_ms[1] > 0 and compiled.timings_ms[2:] == (0.0, 0.0, 0.0)

    executed = run(runner, desc, MODE_EXECUTE)
    assert (executed.stage, executed.hresult) == (STAGE_OK, 0)
    assert all(t > 0 for t in executed.timings_ms[:4])
    assert len(executed.outputs) == 1 and len(executed.outputs[0]) == size
    got = np.frombuffer(executed.outputs[0], dtype="<f4").reshape(1, 2, 2, 3)
    np.testing.assert_allclose(got, mvn_by_hand(X), rtol=0, atol=1e-5)


def test_refused_desc_reports_stage_and_hresult(runner: Any) -> None:
    reply = run(runner, mvn1(axes=[2, 7]), MODE_EXECUTE)
    assert reply.stage == STAGE_CREATE
    assert reply.hresult & 0xFFFFFFFF == E_INVALIDARG
    assert reply.hresult_hex == "0x80070057"
    assert "CreateOperator" in reply.describe()
    assert reply.outputs == [None]  # no data after a failed stage
    assert_serves(runner)


def _garbled_requests() -> dict[str, Any]:
    desc = mvn1()
    p = pack.pack(desc, SPEC)
    arena, relocs = p.arena, p.relocations
    inputs = pack.input_buffers(p, desc, {"InputTensor": X})
    outputs = [s for _, s in p.outputs]
    far = bytearray(arena)
    struct.pack_into("<Q", far, 8, len(arena) + 8)  # the root's Desc pointer, past the end
    return {
        "empty arena": (b"", (), [], []),
        "arena shorter than DML_OPERATOR_DESC": (arena[:8], (), inputs, outputs),
        "relocation at the arena's end": (arena, (*relocs, len(arena)), inputs, outputs),
        "relocation straddling the end": (arena, (*relocs, len(arena) - 4), inputs, outputs),
        "relocation far out": (arena, (2**63,), inputs, outputs),
        "relocation target past the end": (bytes(far), relocs, inputs, outputs),
        "65 inputs": (arena, relocs, [b"\0" * 4] * 65, outputs),
        "65 outputs": (arena, relocs, inputs, [4] * 65),
    }


def test_garbled_requests_are_bad_requests_and_the_runner_keeps_serving(runner: Any) -> None:
    assert_serves(runner)
    restarts, pid = runner.restarts, runner.proc.pid
    for name, (arena, relocs, inputs, outputs) in _garbled_requests().items():
        reply = runner.run(MODE_EXECUTE, arena, relocs, inputs, outputs, timeout=TIMEOUT)
        assert reply.stage == STAGE_BAD_REQUEST, f"{name}: {reply.describe()}"
        assert reply.hresult == 0 and reply.outputs == [], name
        assert reply.describe().startswith("bad request"), name
    # a payload shorter than its own arena length field says
    body = runner.request(CMD_RUN, struct.pack("<IIQ", MODE_CREATE, 0, 1 << 20) + b"\0" * 16, TIMEOUT)
    assert struct.unpack_from("<Ii", body) == (STAGE_BAD_REQUEST, 0)
    assert (runner.restarts, runner.proc.pid) == (restarts, pid), "the runner was restarted"
    assert_serves(runner)


def test_relocation_target_at_arena_end_is_a_bad_request(runner: Any) -> None:
    p = pack.pack(mvn1(), SPEC)
    arena = bytearray(p.arena)
    struct.pack_into("<Q", arena, 8, len(arena))
    reply = runner.run(MODE_CREATE, bytes(arena), p.relocations, [], [], timeout=TIMEOUT)
    assert reply.stage == STAGE_BAD_REQUEST


# --------------------------------------------------------------------------------------------
# Hangs and crashes


def test_timeout_kills_and_restarts(runner: Any) -> None:
    assert_serves(runner)
    restarts = runner.restarts
    start = time.monotonic()
    with pytest.raises(RunnerError) as err:
        runner.sleep(5000, timeout=1)
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 3.5, elapsed
    message = str(err.value)
    assert "\n" not in message
    assert re.search(r"did not answer|timed? ?out", message) and re.search(r"\b1 ?s\b", message), message
    assert runner.restarts == restarts + 1
    assert_serves(runner)
    assert runner.restarts == restarts + 1


def test_crash_is_reported_and_the_next_request_works(runner: Any) -> None:
    assert_serves(runner)
    restarts = runner.restarts
    start = time.monotonic()
    with pytest.raises(RunnerError, match="crashed"):
        runner.crash(timeout=30)
    assert time.monotonic() - start < 10, "winedbg.exe=d should make a crash exit at once"
    assert runner.restarts == restarts + 1
    assert_serves(runner)


def test_restart_start_up_is_not_charged_to_the_next_request(runner: Any) -> None:
    with pytest.raises(RunnerError, match="crashed"):
        runner.crash(timeout=30)
    # info takes well under a millisecond once the runner is up
    assert runner.info([FL_6_4], [], timeout=0.05)["max_feature_level"] == "0x6400"


# --------------------------------------------------------------------------------------------
# Outputs DirectML did not write


@pytest.mark.parametrize(("data_type", "item"), [("FLOAT32", 4), ("FLOAT16", 2)])
def test_output_padding_comes_back_as_the_nan_prefill(runner: Any, data_type: str, item: int) -> None:
    strides = [16, 16, 8, 2]  # every other element, and a gap after each row
    desc = mvn1(out_strides=strides, data_type=data_type)
    reply = run(runner, desc, MODE_EXECUTE)
    assert reply.ok, reply.describe()
    data = reply.outputs[0]
    assert len(data) == pack.pack(desc, SPEC).outputs[0][1]
    written = {sum(i * s for i, s in zip(idx, strides, strict=True)) * item for idx in np.ndindex(1, 2, 2, 3)}
    padding = [k for k in range(0, len(data), item) if k not in written]
    assert padding
    for k in padding:
        assert data[k : k + item] == b"\xff" * item, f"padding at byte {k} was written"
    got = pack.output_array(data, desc.members["OutputTensor"])
    atol = 1e-5 if data_type == "FLOAT32" else 4e-3
    np.testing.assert_allclose(got.astype(np.float64), mvn_by_hand(X.astype(got.dtype)), rtol=0, atol=atol)


# --------------------------------------------------------------------------------------------
# The self-test


def test_self_test_passes_on_this_stack(runner: Any) -> None:
    result = run_self_test(runner, SPEC, timeout=TIMEOUT)
    assert result.passed, result.detail


def _system_lavapipe() -> Path:
    if not SYSTEM_ICD.is_file():
        pytest.skip(f"no system lavapipe at {SYSTEM_ICD} (Debian's mesa-vulkan-drivers)")
    if STACK.icd_json.resolve() == SYSTEM_ICD.resolve():
        pytest.skip("the stack already uses the system lavapipe")
    return SYSTEM_ICD


def test_self_test_fails_on_the_system_lavapipe() -> None:
    """Mesa 22's lavapipe lacks descriptor indexing: DirectML says S_OK and writes garbage."""
    stack = dataclasses.replace(STACK, icd_json=_system_lavapipe())
    with Session(stack) as session:
        result = run_self_test(session.runner, SPEC, timeout=TIMEOUT)
    assert not result.passed
    assert re.search(r"not finite|max error", result.detail), result.detail


def test_backend_refuses_a_stack_that_computes_garbage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the system ICD, beside the version.txt that Stack.describe() reads (setup writes one)
    icd = tmp_path / SYSTEM_ICD.name
    icd.write_bytes(_system_lavapipe().read_bytes())
    (tmp_path / "version.txt").write_text("22.3.6 (Debian bookworm)\n")
    stack = dataclasses.replace(STACK, icd_json=icd)
    monkeypatch.setattr(backend_module, "locate", lambda *args, **kwargs: stack)
    with pytest.raises(BackendError) as err:
        load_backend("directml")
    message = str(err.value)
    assert "self-test" in message, message
    assert "\n" not in message


def test_backend_names_the_self_test_with_the_system_icd_as_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = dataclasses.replace(STACK, icd_json=_system_lavapipe())
    monkeypatch.setattr(backend_module, "locate", lambda *args, **kwargs: stack)
    with pytest.raises(BackendError) as err:
        load_backend("directml")
    assert "self-test" in str(err.value), str(err.value)


# --------------------------------------------------------------------------------------------
# The backend


def test_backend_identity(backend: Any) -> None:
    assert backend.name == "directml"
    assert backend.feature_level == "6_4"
    v = backend.versions()
    assert v["directml"].startswith("1.15.4")
    assert v["directml.max_feature_level"] == "6_4"
    assert re.search(r"\(vendor 0x[0-9a-f]{4}, device 0x[0-9a-f]{4}\)", v["directml.adapter"])
    assert re.match(r"lavapipe \(Mesa (2[5-9]|[3-9]\d)\.", v["directml.vulkan_driver"]), v
    assert v["directml.float16"] == "supported"
    assert "1.15.4" in backend.describe() and "6_4" in backend.describe()


#: descs DirectML 1.15.4 is known to compute wrongly (releases/findings.yaml), which the plumbing
#: tests below must not draw: F9, LRN_GRAD with an even LocalSize sums over the forward window
KNOWN_WRONG = {"LOCAL_RESPONSE_NORMALIZATION_GRAD": lambda d: int(d.members["LocalSize"]) % 2 == 0}


def _small_float32_desc(op: str) -> OperatorDesc:
    for desc in legal_descs(op, "6_4", seed=0, count=40, dtype="FLOAT32", max_elements=512, spec=SPEC):
        if KNOWN_WRONG.get(op, lambda d: False)(desc):
            continue
        tensors = desc.tensors()
        x = tensors["InputTensor"]
        if all(t.data_type == "FLOAT32" for t in tensors.values()) and 8 <= x.element_count <= 512:
            return desc
    raise AssertionError(f"no small FLOAT32 legal desc of {op}")


@pytest.mark.parametrize("op", sorted(SPEC.operators))
def test_execute_matches_the_reference(backend: Any, op: str) -> None:
    desc = _small_float32_desc(op)
    assert "standard_normal" in regimes_for(desc, SPEC)
    inputs = make_inputs(desc, "standard_normal", seed=0, spec=SPEC)
    got = backend.execute(desc, inputs)
    present = {m.name for m in SPEC.operator(op).output_members if desc.members.get(m.name) is not None}
    assert set(got) == present, "an output is missing"
    for name, array in got.items():
        assert array.shape == desc.members[name].sizes
        assert array.dtype == np.float32
        assert np.isfinite(array).all(), f"{name} holds NaN: DirectML did not write it"
    ref = execute(desc, inputs)
    result = compare(desc, got, {k: ref[k] for k in got}, inputs, SPEC, NO_OPTIONS)
    assert result.passed, f"{desc.to_yaml()}\n{result.message}"
    assert set(backend.last_info()["directml_ms"]) == {"create", "compile", "init", "execute", "readback"}


def test_execute_with_dml_owned_inputs(backend: Any) -> None:
    """OWNED_BY_DML tensors are bound to the initializer, not to the execution."""
    x = {"DataType": "FLOAT32", "Sizes": [2, 3, 2, 2]}
    owned = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1], "Flags": "OWNED_BY_DML"}
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION",
            "desc": {
                "InputTensor": x,
                "MeanTensor": owned,
                "VarianceTensor": owned,
                "ScaleTensor": owned,
                "BiasTensor": owned,
                "OutputTensor": x,
                "Spatial": True,
                "Epsilon": 1e-3,
            },
        }
    )
    assert pack.pack(desc, SPEC).owned == {"MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"}
    rng = np.random.default_rng(1)
    c = (1, 3, 1, 1)
    inputs = {
        "InputTensor": rng.standard_normal((2, 3, 2, 2)).astype(np.float32),
        "MeanTensor": rng.standard_normal(c).astype(np.float32),
        "VarianceTensor": rng.uniform(0.5, 2.0, c).astype(np.float32),
        "ScaleTensor": rng.standard_normal(c).astype(np.float32),
        "BiasTensor": rng.standard_normal(c).astype(np.float32),
    }
    got = backend.execute(desc, inputs)["OutputTensor"].astype(np.float64)
    f = {k: v.astype(np.float64) for k, v in inputs.items()}
    want = (f["InputTensor"] - f["MeanTensor"]) / np.sqrt(f["VarianceTensor"] + 1e-3) * f["ScaleTensor"] + f[
        "BiasTensor"
    ]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_check_accepts_legal_and_rejects_an_axis_out_of_range(backend: Any) -> None:
    assert backend.check(mvn1()) is None
    bad = mvn1(axes=[2, 7])
    with pytest.raises(Rejected, match="E_INVALIDARG"):
        backend.check(bad)
    with pytest.raises(Rejected, match="E_INVALIDARG"):
        backend.execute(bad, {"InputTensor": X})
    # what C cannot say never reaches DirectML
    with pytest.raises(Unsupported):
        backend.check(mvn1().replace(NormalizeVariance=...))


def test_check_below_the_dlls_level_skips_descs_whose_verdict_changes_on_the_way(backend: Any) -> None:
    """DirectML validates at the level it implements (6_4), whatever a device asks for: at a
    requested 5_0, a BiasTensor without ScaleTensor (illegal below 5_2, legal from it) cannot be
    put to it, while a desc illegal at both levels is still DirectML's to refuse."""
    low = load_backend("directml", {"feature_level": "5_0"})
    try:
        assert low.feature_level == "5_0"
        bias = {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}
        one_sided = mvn1().replace(
            BiasTensor=parse_desc(
                {"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {"BiasTensor": bias}}
            ).members["BiasTensor"]
        )
        backend.check(one_sided)  # legal at 6_4: DirectML accepts it
        with pytest.raises(Unsupported, match="validates at 6_4"):
            low.check(one_sided)
        with pytest.raises(Rejected, match="E_INVALIDARG"):
            low.check(mvn1(axes=[2, 7]))
    finally:
        low.close()


def test_execute_refuses_a_huge_input_size_without_allocating_it(backend: Any) -> None:
    huge = TensorDesc("FLOAT32", (1, 2, 2, 3), total_tensor_size_in_bytes=2**50)
    desc = mvn1().replace(InputTensor=huge)
    with pytest.raises(Rejected):
        backend.execute(desc, {"InputTensor": X})


def test_a_dll_that_does_not_load_is_named(tmp_path: Path) -> None:
    dll = tmp_path / "DirectML.dll"
    dll.write_bytes(b"MZ" + b"\0" * 1022)
    with pytest.raises(BackendError) as err:
        load_backend("directml", {"dll": str(dll)})
    assert "LoadLibrary" in str(err.value), str(err.value)


# --------------------------------------------------------------------------------------------
# The command line


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dmlconform.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_cli_smoke_run(tmp_path: Path) -> None:
    report = tmp_path / "report"
    done = _cli(
        "run",
        "--backend",
        "directml",
        "--tier",
        "smoke",
        "--operators",
        "MEAN_VARIANCE_NORMALIZATION1",
        "--dtypes",
        "FLOAT32",
        "--report",
        str(report),
    )
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((report / "results.json").read_text())
    summary = results["summary"]
    assert results["exit_status"] == done.returncode
    assert done.returncode == (1 if summary["failed"] or summary["errors"] else 0)
    assert summary["errors"] == 0
    assert results["backend"]["name"] == "directml"
    assert results["versions"]["directml"].startswith("1.15.4")
    numeric = [c for c in results["cases"] if c["kind"] == "numeric"]
    assert numeric and all(c["outcome"] == "passed" for c in numeric), numeric
    assert {c["operator"] for c in results["cases"]} == {"MEAN_VARIANCE_NORMALIZATION1"}


@pytest.mark.parametrize(
    ("option", "needles"),
    [
        ("version=9.9", ["9.9", *(r.dml_version for r in RELEASES)]),
        ("dll=/nonexistent", ["/nonexistent"]),
    ],
    ids=["version", "dll"],
)
def test_cli_bad_backend_option_is_one_line(tmp_path: Path, option: str, needles: list[str]) -> None:
    done = _cli("run", "--backend", "directml", "--backend-option", option, "--report", str(tmp_path / "r"))
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    for needle in needles:
        assert needle in lines[0]
