"""Misbehaving backends for the plugin, run and replay tests (and a check of the helpers).

Each one is the reference backend except on FLOAT16 descs, where it misbehaves in one way: so a
run over both data types shows that the bad behaviour fails exactly those cases and the others
still pass. The tests load them as ``test_plugin_backends:ClassName`` with this directory on the
path (in-process runs and the subprocesses they start alike).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
from helpers import SPEC

from dmlconform.backends.reference import ReferenceBackend
from dmlconform.specification.desc import OperatorDesc

HERE = os.path.dirname(os.path.abspath(__file__))


def is_fp16(desc: OperatorDesc) -> bool:
    t = desc.members.get("InputTensor")
    return getattr(t, "data_type", None) == "FLOAT16"


class _OnFp16(ReferenceBackend):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        raise NotImplementedError

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> Any:
        outputs = super().execute(desc, inputs)
        return self.misbehave(desc, outputs) if is_fp16(desc) else outputs


class Raises(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        raise RuntimeError("kaboom in the fp16 kernel")


class RaisesKeyboardInterrupt(_OnFp16):
    """A runtime that turns its own abort into KeyboardInterrupt: not the user's Ctrl-C."""

    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        raise KeyboardInterrupt


def _reshape_to_nothing(outputs: dict[str, np.ndarray]) -> Any:
    out = outputs["OutputTensor"]
    return np.reshape(out, out.size + 1)  # numpy raises, in its own frames below this line


class RaisesInNumpy(_OnFp16):
    """Raises inside numpy, two frames of its own module above: the message names the innermost
    of its own frames (the line its author changes), the traceback every frame."""

    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return _reshape_to_nothing(outputs)


class WrongShape(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return {k: v.reshape(-1) for k, v in outputs.items()}


class WrongDtype(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return {k: v.astype(np.float64) for k, v in outputs.items()}


class MissingMember(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return {}


class WrongValues(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return {k: (v.astype(np.float32) * 1.5 + 0.25).astype(v.dtype) for k, v in outputs.items()}


class NearlyFp16(_OnFp16):
    """FLOAT16 outputs off by 2^-9 relative (about 2 ULP): beyond the default model, within a
    bound of a few times it (the known findings tests)."""

    name = "nearly"

    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return {k: (v.astype(np.float32) * (1 + 2**-9)).astype(v.dtype) for k, v in outputs.items()}


_RELEASE = threading.Event()


class Hangs(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        _RELEASE.wait(20)  # an abandoned thread ends by itself soon after the test
        return outputs


class Exits(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        os._exit(3)


class Segfaults(_OnFp16):
    def misbehave(self, desc: OperatorDesc, outputs: dict[str, np.ndarray]) -> Any:
        return ctypes.string_at(0)


class NoCheck:
    """Duck-typed, no base class and no ``check``: gets no validation items."""

    name = "nocheck"
    feature_level = "6_4"

    def __init__(self, **options: str):
        self.inner = ReferenceBackend(**options)

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> Any:
        return self.inner.execute(desc, inputs)


class AcceptsAll(ReferenceBackend):
    """check() that never rejects: every illegal validation case must fail."""

    def check(self, desc: OperatorDesc) -> None:
        return None


def test_helpers_misbehave_only_on_fp16() -> None:
    from dmlconform.generation.legal import legal_descs

    d32 = next(legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", dtype="FLOAT32", count=1, spec=SPEC))
    d16 = next(legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", dtype="FLOAT16", count=1, spec=SPEC))
    assert not is_fp16(d32) and is_fp16(d16)


class ClaimsSeven(NoCheck):
    """Claims a feature level no spec here knows."""

    feature_level = "7_0"


class ClaimsFiveTwo(NoCheck):
    """Claims 5_2 and takes no feature_level option: a run above 5_2 tests it above its claim."""

    feature_level = "5_2"
