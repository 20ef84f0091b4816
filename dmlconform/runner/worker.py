"""The isolated backend worker: ``python -m dmlconform.runner.worker``.

Speaks length-prefixed pickle frames on its original stdout/stdin (see ``guard.ProcessGuard``).
File descriptor 1 is pointed at stderr once the protocol stream is saved, so a backend that prints
(or a native library that writes to fd 1) cannot corrupt the protocol.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from dmlconform.errors import Rejected, Unsupported
from dmlconform.runner.guard import backend_info, describe_exception, invoke, raised, read_frame, write_frame


def _serve(proto_in: Any, proto_out: Any) -> int:
    try:
        kind, init = read_frame(proto_in)
    except EOFError:
        return 0
    for p in init.get("sys_path") or []:
        if p not in sys.path:
            sys.path.append(p)
    try:
        from dmlconform.backends import load_backend

        backend = load_backend(init["backend"], init.get("options") or {}, init.get("level"))
        write_frame(proto_out, ("ready", backend_info(backend)))
    except Exception as exc:
        write_frame(proto_out, ("error", describe_exception(exc)))
        return 1
    while True:
        try:
            method, desc, inputs = read_frame(proto_in)
        except EOFError:
            return 0
        if method == "quit":
            return 0
        try:
            reply: tuple[str, Any] = ("ok", invoke(backend, method, desc, inputs))
        except Rejected as exc:  # as a plain Rejected, its stage and HRESULT kept (errors._Staged)
            reply = ("rejected", Rejected(str(exc), stage=exc.stage, hresult=exc.hresult))
        except Unsupported as exc:
            reply = ("unsupported", str(exc))
        except BaseException as exc:  # noqa: BLE001 - report everything, keep serving
            reply = ("raised", raised(exc, backend))  # the traceback as text: it crosses the pipe
        try:
            write_frame(proto_out, reply)
        except Exception as exc:  # e.g. a result that does not pickle
            write_frame(proto_out, ("raised", f"result could not be sent back: {describe_exception(exc)}"))


def main() -> int:
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    proto_in = sys.stdin.buffer
    return _serve(proto_in, proto_out)


if __name__ == "__main__":
    sys.exit(main())
