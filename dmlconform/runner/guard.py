"""Guarded backend calls: a backend under test may raise, hang or crash, and the run must go on.

Two guards share one interface, ``call(method, desc, inputs) -> (value, info)``:

- :class:`ThreadGuard` (default) runs the call in a daemon thread and waits ``timeout`` seconds.
  Cheap, but a hung call cannot be stopped (Python has no thread kill): the thread is abandoned
  and the case fails; a segfault still takes the process down.
- :class:`ProcessGuard` (``--isolate``, ``--dml-isolate``) keeps one worker process per pytest process
  (``python -m dmlconform.runner.worker``) that loads the backend once and serves calls over a
  pipe. A hang kills the worker; a crash (segfault, ``os._exit``) is seen as end-of-file. Either
  way the case fails with the reason and the next call starts a fresh worker. A persistent worker
  rather than a process per case, because importing numpy and a native runtime costs a second or
  more, which would dominate a run of hundreds of small cases.

Backend exceptions are translated: ``Rejected`` and ``Unsupported`` pass through (they are
verdicts), anything else becomes :class:`BackendFailure` with a one-line message that names
where the backend raised (``(at mybackend.py:42 in execute)``) and carries the whole formatted
traceback, which a case keeps for its reproducer (a traceback object does not cross the worker's
pipe, so both guards turn it into text the same way: :func:`raised`).
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np

from dmlconform.backends.base import takes_level
from dmlconform.errors import Rejected, Unsupported
from dmlconform.specification.spec import FeatureLevel


class BackendFailure(Exception):
    """The backend misbehaved on one case (raised, hung, crashed, returned garbage).

    ``traceback``: the backend's formatted traceback when it raised (None otherwise): too long for
    the one-line message, kept for the case's reproducer and ``replay``."""

    def __init__(self, message: str, traceback: str | None = None):
        super().__init__(message)
        self.traceback = traceback


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@dataclass(frozen=True)
class Raised:
    """A backend's exception as plain text, the same from a thread and from the worker process:
    ``summary`` (``ZeroDivisionError: division by zero``), ``where`` (``mybackend.py:42 in
    execute``: the raising frame in the backend's own code; None when no frame is known) and the
    formatted ``traceback``."""

    summary: str
    where: str | None
    traceback: str

    def failure(self, method: str) -> BackendFailure:
        at = f" (at {self.where})" if self.where else ""
        return BackendFailure(f"backend {method}() raised {self.summary}{at}", self.traceback)


#: The harness's own files, whose frames lead into a backend call and are left out of its traceback.
_HARNESS_FILES = frozenset(
    os.path.normcase(os.path.abspath(os.path.join(os.path.dirname(__file__), name)))
    for name in ("guard.py", "worker.py")
)


def _in_harness(tb: TracebackType) -> bool:
    return os.path.normcase(os.path.abspath(tb.tb_frame.f_code.co_filename)) in _HARNESS_FILES


def _frame_line(tb: TracebackType) -> str:
    return (
        f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno} in {tb.tb_frame.f_code.co_name}"
    )


def raised(exc: BaseException, backend: Any = None) -> Raised:
    """``exc`` as :class:`Raised`. The traceback starts at the first frame outside the guard (the
    backend's ``execute``, ``check`` or ``supports``). ``where`` is the innermost frame of the
    backend's own package (``type(backend).__module__``'s top level): an exception raised inside
    numpy or the standard library is named at the backend's line that called it, which is the
    line a backend's author changes; the full traceback still shows the frames below it. Without
    a frame of that package (or a backend), the innermost frame."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and _in_harness(tb):
        tb = tb.tb_next
    frames = []
    walk = tb
    while walk is not None:
        frames.append(walk)
        walk = walk.tb_next
    package = type(backend).__module__.split(".")[0] if backend is not None else None
    own = [f for f in frames if package and f.tb_frame.f_globals.get("__name__", "").split(".")[0] == package]
    frame = (own or frames or [None])[-1]
    text = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")
    return Raised(describe_exception(exc), _frame_line(frame) if frame is not None else None, text)


@dataclass
class BackendInfo:
    """What the run needs to know about a backend before any case runs.

    ``validates``: the backend declares ``validates = True`` and has ``check`` (validation cases
    run); ``has_check``: it defines ``check`` at all (a ``check`` without the declaration is not
    called, and the run says so); ``has_supports``: it defines ``supports(desc)``."""

    name: str
    feature_level: str | None
    has_check: bool
    description: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    #: tolerance overrides the backend asks for (its ``tolerance`` attribute, e.g.
    #: {"model": "lenient"}); the run applies them and the report shows them
    tolerance: dict[str, str] = field(default_factory=dict)
    validates: bool = False
    has_supports: bool = False
    #: options whose value results depend on, as the backend resolved them (BackendBase's
    #: ``travelling_options``); saved with the run and its reproducers
    travelling: dict[str, str] = field(default_factory=dict)
    #: the backend declares a ``feature_level`` option (it was given the level under test)
    takes_level: bool = False


def backend_validates(backend: Any) -> bool:
    """Whether ``backend`` asks to be judged on validation: ``validates = True`` and a callable
    ``check``. Defining ``check`` alone is not enough: validation is a capability a backend
    declares, not one it falls into by having a method of that name."""
    return getattr(backend, "validates", False) is True and callable(getattr(backend, "check", None))


def support_reason(value: Any) -> str | None:
    """What a backend's ``supports(desc)`` answered, as None (supported) or the reason it is not:
    ``True``/``None`` mean supported, a string is the reason, ``False`` an unexplained no."""
    if isinstance(value, str):
        return value.strip() or "the backend does not support this desc"
    if value is None or value is True:
        return None
    if value is False:
        return "the backend does not support this desc (supports() returned False)"
    return (
        None if bool(value) else "the backend does not support this desc (supports() returned a false value)"
    )


def backend_info(backend: Any) -> BackendInfo:
    def _safe(fn: Any, default: Any) -> Any:
        try:
            return fn() if callable(fn) else default
        except Exception:
            return default

    versions = _safe(getattr(backend, "versions", None), {}) or {}
    return BackendInfo(
        name=str(getattr(backend, "name", type(backend).__name__)),
        feature_level=getattr(backend, "feature_level", None),
        has_check=callable(getattr(backend, "check", None)),
        description=str(_safe(getattr(backend, "describe", None), "") or ""),
        versions={str(k): str(v) for k, v in dict(versions).items()},
        tolerance={str(k): str(v) for k, v in dict(getattr(backend, "tolerance", None) or {}).items()},
        validates=backend_validates(backend),
        has_supports=callable(getattr(backend, "supports", None)),
        travelling={
            str(k): str(v)
            for k, v in dict(_safe(getattr(backend, "travelling_options", None), {}) or {}).items()
        },
        takes_level=takes_level(type(backend)),
    )


def invoke(backend: Any, method: str, desc: Any, inputs: Any) -> tuple[Any, Any]:
    """Call ``backend.<method>`` and fetch ``last_info()``; exceptions propagate. ``supports``
    answers None (supported) or the reason, whatever form the backend gave it in."""
    if method == "check":
        backend.check(desc)
        value = None
    elif method == "supports":
        try:
            value = support_reason(backend.supports(desc))
        except Unsupported as exc:
            value = str(exc) or "the backend does not support this desc"
    else:
        # the backend's own copies: one that writes into its inputs (an in-place implementation,
        # a torch tensor sharing the array's memory) must not change the inputs the suite judges
        # with, records in the reproducer, or runs a relation's second execution on
        value = backend.execute(
            desc, {k: a.copy() if isinstance(a, np.ndarray) else a for k, a in inputs.items()}
        )
    info = None
    last = getattr(backend, "last_info", None)
    if method == "execute" and callable(last):
        try:
            info = last()
        except Exception:
            info = None
    return value, info


class ThreadGuard:
    """In-process calls with a per-call timeout (see the module docstring for the limits)."""

    def __init__(self, backend: Any, timeout: float | None, isolate_flag: str = "--isolate"):
        self.backend = backend
        self.timeout = timeout
        self.isolate_flag = isolate_flag  # named in the hang message: the command's own option

    def call(self, method: str, desc: Any, inputs: Any = None) -> tuple[Any, Any]:
        box: dict[str, Any] = {"backend": self.backend}

        def target() -> None:
            try:
                box["result"] = invoke(self.backend, method, desc, inputs)
            except BaseException as exc:  # noqa: BLE001 - everything is reported, nothing escapes
                box["error"] = exc

        if not self.timeout:
            target()
        else:
            # a signal raises KeyboardInterrupt in the main thread only: one raised on this
            # thread is the backend's own exception, which fails the case (not a Ctrl-C)
            box["threaded"] = True
            t = threading.Thread(target=target, name=f"dml-backend-{method}", daemon=True)
            t.start()
            t.join(self.timeout)
            if t.is_alive():
                raise BackendFailure(
                    f"backend {method}() did not return within {self.timeout:g} s (timed out; "
                    f"the call was abandoned, use {self.isolate_flag} to kill hung calls)"
                )
        return _unbox(box, method)

    def supports(self, desc: Any) -> str | None:
        """Why the backend does not support ``desc`` (None: it does, or it does not say)."""
        if not callable(getattr(self.backend, "supports", None)):
            return None
        return self.call("supports", desc)[0]

    def close(self) -> None:
        pass


def _unbox(box: dict[str, Any], method: str) -> tuple[Any, Any]:
    exc = box.get("error")
    if exc is None:
        return box["result"]
    if isinstance(exc, (Rejected, Unsupported)):
        raise exc
    if isinstance(exc, KeyboardInterrupt) and not box.get("threaded"):
        raise exc
    raise raised(exc, box.get("backend")).failure(method) from None


# ------------------------------------------------------------------------------------------
# Process isolation

_HEADER = struct.Struct("<Q")


def write_frame(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: Any) -> Any:
    """The next frame, or raise EOFError when the other side is gone."""
    head = _read_exact(stream, _HEADER.size)
    (n,) = _HEADER.unpack(head)
    return pickle.loads(_read_exact(stream, n))


def _read_exact(stream: Any, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ProcessGuard:
    """Backend calls in a worker process that a crash or hang cannot take down the run with."""

    def __init__(
        self,
        backend: str,
        options: dict[str, str],
        timeout: float | None,
        startup_timeout: float = 120,
        level: FeatureLevel | None = None,
    ):
        self.backend = backend
        self.options = dict(options)
        self.level = level
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.replies: queue.Queue[Any] = queue.Queue()
        self.info: BackendInfo | None = None

    # The reader thread turns a blocking pipe into a queue we can wait on with a timeout; this
    # works on Windows too, where select() does not take pipes.
    def _reader(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            while True:
                self.replies.put(("frame", proc, read_frame(proc.stdout)))
        except Exception:
            self.replies.put(("eof", proc, None))

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")]).strip(
            os.pathsep
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dmlconform.runner.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.replies = queue.Queue()
        threading.Thread(target=self._reader, args=(self.proc,), daemon=True).start()
        write_frame(
            self.proc.stdin,
            (
                "init",
                {"backend": self.backend, "options": self.options, "level": self.level, "sys_path": sys.path},
            ),
        )
        status, value = self._wait(self.startup_timeout, "start")
        if status != "ready":
            self.close()
            raise BackendFailure(f"backend worker could not load {self.backend!r}: {value}")
        self.info = value

    def _wait(self, timeout: float | None, what: str) -> tuple[str, Any]:
        proc = self.proc
        while True:
            try:
                kind, source, payload = self.replies.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                raise BackendFailure(
                    f"backend {what}() did not return within {timeout:g} s (timed out; worker process killed)"
                ) from None
            if source is not proc:
                continue  # a late message from a worker that was already replaced
            if kind == "eof":
                code = proc.wait() if proc is not None else None
                self.proc = None
                raise BackendFailure(f"backend process died during {what}() ({exit_reason(code)})")
            return payload

    def call(self, method: str, desc: Any, inputs: Any = None) -> tuple[Any, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None
        try:
            write_frame(self.proc.stdin, (method, desc, inputs))
        except (BrokenPipeError, OSError):
            code = self.proc.wait()
            self.proc = None
            raise BackendFailure(f"backend process died before {method}() ({exit_reason(code)})") from None
        status, value = self._wait(self.timeout, method)
        if status == "ok":
            return value
        if status == "rejected":
            raise value  # the worker's Rejected itself, its stage and HRESULT kept
        if status == "unsupported":
            raise Unsupported(value)
        if isinstance(value, Raised):
            raise value.failure(method)
        raise BackendFailure(f"backend {method}() raised {value}")

    def supports(self, desc: Any) -> str | None:
        """Why the backend does not support ``desc`` (None: it does, or it does not say)."""
        if self.info is None and (self.proc is None or self.proc.poll() is not None):
            self._start()
        if self.info is None or not getattr(self.info, "has_supports", False):
            return None
        return self.call("supports", desc)[0]

    def kill(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(10)
            except Exception:
                pass
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            try:
                write_frame(self.proc.stdin, ("quit", None, None))
                self.proc.stdin.close()
                self.proc.wait(5)
            except Exception:
                pass
            self.kill()
