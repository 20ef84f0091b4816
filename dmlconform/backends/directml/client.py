"""The Python side of the runner's pipe protocol (``runner.c`` has the wire format).

One runner process under Wine serves many cases: starting one costs 0.5-3 s, a small case
under a millisecond. The client owns that process: it starts it (and the Xvfb it needs) on first
use, times every request out from this side (a case that hangs is killed and the runner
restarted), and turns a crash or a removed device into that case's error while the next case
gets a fresh runner. A runner's exit status of 0 proves nothing under Wine, so every reply is
checked for its magic and length.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

MAGIC_REQUEST = 0x514C4D44
MAGIC_REPLY = 0x414C4D44
CMD_INFO, CMD_RUN, CMD_SLEEP, CMD_CRASH, CMD_QUIT = 1, 2, 3, 4, 5
#: The runner's last word when D3D12CreateDevice fails, and how often a start is retried for it.
NO_DEVICE = "D3D12CreateDevice failed"
DEVICE_RETRIES = 2
MODE_CREATE, MODE_COMPILE, MODE_EXECUTE = 0, 1, 2
NO_BINDING = 2**64 - 1

#: What the runner's reply says it got to (runner.c, STAGE_*).
STAGES = {
    0: "ok",
    1: "CreateOperator",
    2: "CompileOperator",
    3: "initialization",
    4: "execution",
    5: "device removed",
    6: "bad request",
    7: "resource allocation",
}


class RunnerError(Exception):
    """The runner died, hung, or answered nonsense; the message is one line."""


@dataclass
class RunReply:
    stage: int
    hresult: int
    timings_ms: tuple[float, ...]
    outputs: list[bytes | None] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.stage == 0

    @property
    def hresult_hex(self) -> str:
        return f"0x{self.hresult & 0xFFFFFFFF:08X}"

    def describe(self) -> str:
        return f"{STAGES.get(self.stage, self.stage)} returned {self.hresult_hex}"


@dataclass
class RunnerCommand:
    """How to start a runner: argv and environment (``stack.Stack.runner_command`` builds it)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None


class Runner:
    """A runner process, restarted on demand. Not thread-safe: one per process or worker."""

    #: Seconds before the first retry of a start refused a device; the n-th waits n times that.
    device_retry_pause = 0.5

    def __init__(self, command: RunnerCommand, start_timeout: float = 60.0) -> None:
        self.command = command
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.stderr_path: Path | None = None
        self._answered = False

    # -- process ------------------------------------------------------------------------------

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        self._answered = False  # each new process gets start_timeout on its first request
        log_dir = Path(self.command.env.get("XDG_RUNTIME_DIR") or "/tmp")
        self.stderr_path = log_dir / f"dmlconform-runner-{os.getpid()}.log"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 -- closed in stop()
        try:
            self.proc = subprocess.Popen(
                self.command.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self.command.env,
                cwd=self.command.cwd,
                start_new_session=True,  # a timeout kills the whole group (wine's children too)
            )
        except OSError as exc:
            raise RunnerError(f"cannot start the DirectML runner: {exc}") from None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(Exception):
                self._send(proc, CMD_QUIT, b"")
                proc.wait(timeout=2)
        if proc.poll() is None:
            self._kill(proc)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(Exception):
                stream.close()  # type: ignore[union-attr]
        with contextlib.suppress(Exception):
            self._stderr.close()

    def _last_stderr_line(self) -> str:
        """The runner's own last word (e.g. which call failed), if it said one."""
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines() if self.stderr_path else []
        except OSError:
            return ""
        ours = [ln.strip() for ln in lines if ln.startswith("dmlconform runner:")]
        return ours[-1] if ours else ""

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)

    def _restart_after(self, why: str) -> RunnerError:
        proc, self.proc = self.proc, None
        if proc is not None:
            self._kill(proc)
        self.restarts += 1
        return RunnerError(why)

    # -- wire -----------------------------------------------------------------------------------

    @staticmethod
    def _send(proc: subprocess.Popen[bytes], command: int, payload: bytes) -> None:
        assert proc.stdin is not None
        proc.stdin.write(struct.pack("<IIQ", MAGIC_REQUEST, command, len(payload)))
        proc.stdin.write(payload)
        proc.stdin.flush()

    def _read(self, n: int, deadline: float) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n - got, 1 << 24))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def request(self, command: int, payload: bytes, timeout: float) -> bytes:
        """Send one request and return the reply's payload; a hang, crash or garbled reply
        kills the runner (the next request starts a new one) and raises RunnerError.

        A new process that dies because Wine would not create a D3D12 device has run nothing, so
        it is started again, :data:`DEVICE_RETRIES` times at most: on a busy 2-core CI machine
        whose runners share one wineserver, D3D12CreateDevice refused one start of the release
        tests (0x887a0004, Wine's answer without an X server, though the runner's Xvfb had
        started; not reproduced in 35 runs of those tests and 300 starts more). Anything else,
        and a refusal that persists, is reported as it is."""
        retries = 0
        while True:
            try:
                return self._request_once(command, payload, timeout)
            except RunnerError as exc:
                if retries == DEVICE_RETRIES or NO_DEVICE not in str(exc):
                    raise
            retries += 1
            time.sleep(self.device_retry_pause * retries)

    def _request_once(self, command: int, payload: bytes, timeout: float) -> bytes:
        self.start()
        assert self.proc is not None
        first_use = not self._answered
        deadline = time.monotonic() + timeout + (self.start_timeout if first_use else 0.0)
        try:
            self._send(self.proc, command, payload)
            head = self._read(16, deadline)
            magic, echoed, length = struct.unpack("<IIQ", head)
            if magic != MAGIC_REPLY or echoed != command:
                raise self._restart_after(f"the DirectML runner answered garbage (magic 0x{magic:08x})")
            body = self._read(length, deadline)
        except TimeoutError:
            raise self._restart_after(
                f"the DirectML runner did not answer within {timeout:g} s (killed)"
            ) from None
        except (EOFError, BrokenPipeError, OSError):
            status = self.proc.poll() if self.proc is not None else None
            if status is None and self.proc is not None:
                with contextlib.suppress(Exception):
                    status = self.proc.wait(timeout=5)
            said = self._last_stderr_line()
            raise self._restart_after(
                f"the DirectML runner crashed (exit status {status}){': ' + said if said else ''}"
            ) from None
        self._answered = True
        return body

    # -- commands -------------------------------------------------------------------------------

    def info(self, levels: list[int], data_types: list[int], timeout: float) -> dict[str, str]:
        payload = struct.pack(f"<I{len(levels)}I", len(levels), *levels)
        payload += struct.pack(f"<I{len(data_types)}I", len(data_types), *data_types)
        text = self.request(CMD_INFO, payload, timeout).decode("utf-8", "replace")
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def run(
        self,
        mode: int,
        arena: bytes,
        relocations: tuple[int, ...],
        inputs: list[bytes | None],
        outputs: list[int],
        timeout: float,
        execution_flags: int = 0,
        owned: list[bool] | None = None,
    ) -> RunReply:
        """One desc: ``inputs`` are the input bindings' bytes in binding order (None for a null
        tensor), ``owned`` flags the DML-owned ones, ``outputs`` the output bindings' sizes."""
        parts = [
            struct.pack("<IIQ", mode, execution_flags, len(arena)),
            arena,
            struct.pack(f"<I{len(relocations)}Q", len(relocations), *relocations),
            struct.pack("<I", len(inputs)),
        ]
        for i, data in enumerate(inputs):
            flag = int(bool(owned and owned[i]))
            if data is None:
                parts.append(struct.pack("<QI", NO_BINDING, flag))
            else:
                parts.append(struct.pack("<QI", len(data), flag))
                parts.append(data)
        parts.append(struct.pack(f"<I{len(outputs)}Q", len(outputs), *outputs))
        body = self.request(CMD_RUN, b"".join(parts), timeout)
        try:
            stage, hresult = struct.unpack_from("<Ii", body, 0)
            timings = struct.unpack_from("<5d", body, 8)
            (count,) = struct.unpack_from("<I", body, 48)
            pos, data = 52, []
            for _ in range(count):
                (size,) = struct.unpack_from("<Q", body, pos)
                pos += 8
                data.append(body[pos : pos + size] if size else None)
                pos += size
        except struct.error:
            raise self._restart_after("the DirectML runner sent a truncated reply") from None
        reply = RunReply(stage, hresult, tuple(timings), data)
        if reply.stage == 5:  # the runner exits after a removed device; start afresh next time
            self._restart_after("device removed")
        return reply

    def sleep(self, milliseconds: int, timeout: float) -> None:
        self.request(CMD_SLEEP, struct.pack("<I", milliseconds), timeout)

    def crash(self, timeout: float) -> None:
        self.request(CMD_CRASH, struct.pack("<I", 0), timeout)
