"""The DirectML runner's client without DirectML: a stand-in runner in Python speaks the pipe
protocol, so what the client retries and what it reports runs on any machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dmlconform.backends.directml.client import (
    CMD_INFO,
    DEVICE_RETRIES,
    MAGIC_REPLY,
    MAGIC_REQUEST,
    Runner,
    RunnerCommand,
    RunnerError,
)

#: Dies with ``last_word`` on its first ``failures`` starts (counted in a file), then answers one
#: request by echoing its payload in the real runner's framing, and quits.
STAND_IN = f"""
import struct, sys
from pathlib import Path
count, failures, last_word = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
starts = int(count.read_text() or 0) + 1 if count.exists() else 1
count.write_text(str(starts))
if starts <= failures:
    sys.stderr.write("dmlconform runner: " + last_word + "\\n")
    sys.exit(2)
magic, command, length = struct.unpack("<IIQ", sys.stdin.buffer.read(16))
assert magic == {MAGIC_REQUEST:#x}
payload = sys.stdin.buffer.read(length)
sys.stdout.buffer.write(struct.pack("<IIQ", {MAGIC_REPLY:#x}, command, length) + payload)
sys.stdout.buffer.flush()
sys.stdin.buffer.read(16)  # the client's QUIT
"""

NO_DEVICE_WORD = "D3D12CreateDevice failed: 0x887a0004"


def stand_in(tmp_path: Path, failures: int, last_word: str = NO_DEVICE_WORD) -> tuple[Runner, Path]:
    script = tmp_path / "runner.py"
    script.write_text(STAND_IN)
    count = tmp_path / "starts"
    argv = [sys.executable, str(script), str(count), str(failures), last_word]
    runner = Runner(RunnerCommand(argv, {"XDG_RUNTIME_DIR": str(tmp_path)}, str(tmp_path)))
    runner.device_retry_pause = 0.0
    return runner, count


def test_a_start_refused_a_device_is_started_again(tmp_path: Path) -> None:
    runner, count = stand_in(tmp_path, failures=DEVICE_RETRIES)
    try:
        assert runner.request(CMD_INFO, b"payload", timeout=30) == b"payload"
    finally:
        runner.stop()
    assert int(count.read_text()) == DEVICE_RETRIES + 1


def test_a_device_refused_every_time_is_reported_after_the_retries(tmp_path: Path) -> None:
    runner, count = stand_in(tmp_path, failures=DEVICE_RETRIES + 1)
    with pytest.raises(RunnerError, match="exit status 2.*D3D12CreateDevice failed: 0x887a0004"):
        runner.request(CMD_INFO, b"", timeout=30)
    assert int(count.read_text()) == DEVICE_RETRIES + 1


def test_any_other_crash_is_reported_at_once(tmp_path: Path) -> None:
    runner, count = stand_in(tmp_path, failures=1, last_word="LoadLibrary DirectML.dll failed: 0x8007007e")
    with pytest.raises(RunnerError, match="LoadLibrary"):
        runner.request(CMD_INFO, b"", timeout=30)
    assert count.read_text() == "1"
    assert runner.request(CMD_INFO, b"again", timeout=30) == b"again"  # the next request starts afresh
