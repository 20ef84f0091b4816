"""``--backend directml``: the real DirectML.dll, under Wine, judged like any other backend.

``execute`` packs the desc (``pack.py``), sends it with the inputs' buffers to the runner, and
reads the outputs back from their strided buffers. ``check`` asks CreateOperator (and
CompileOperator: every desc DirectML accepted also compiled, but a refusal there is DirectML's
too): E_INVALIDARG is :class:`Rejected`, so a legal desc that DirectML refuses and an illegal
one it accepts become the suite's ordinary validation findings. The feature level is the one
the DLL reports, unless the user asks for a lower one.

Outputs are pre-filled with 0xFF bytes by the runner, so an output DirectML never wrote comes
back NaN and fails its comparison; S_OK alone is never taken as a result (with a lavapipe that
lacks descriptor indexing, DirectML returns S_OK and writes garbage: the self-test catches that).
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from dmlconform.backends.base import BackendBase, BackendError, Option
from dmlconform.backends.directml import pack
from dmlconform.backends.directml.client import MODE_COMPILE, RunnerError, RunReply
from dmlconform.backends.directml.releases import DEFAULT_DML_VERSION, release
from dmlconform.backends.directml.selftest import SelfTest, run_self_test
from dmlconform.backends.directml.stack import Session, StackMissing, locate
from dmlconform.errors import Failure, Rejected, Unsupported
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate

E_INVALIDARG = 0x80070057
#: HRESULTs DirectML returns for a desc it refuses (E_INVALIDARG; E_NOTIMPL for a combination
#: this release does not implement).
REFUSALS = {E_INVALIDARG: "E_INVALIDARG", 0x80004001: "E_NOTIMPL"}
#: The most bytes of bindings one case sends through the pipe (inputs and outputs, here and in
#: the runner's upload, default and readback buffers): a 2^26-element FLOAT32 case with its
#: statistics is about 0.6 GiB.
MAX_BOUND_BYTES = 4 << 30
#: DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION (DirectML.h, enum DML_EXECUTION_FLAGS).
ALLOW_HALF_PRECISION = 0x1


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _known_release(text: str) -> str:
    """A DirectML release of the table (releases.py), refused by name otherwise, even when
    ``dll=`` would make the version unused: a typo must not pass unnoticed."""
    try:
        return release(text).dml_version
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None


def _level_or_auto(text: str) -> str:
    return text if text == "auto" else load_spec().level(text).name


class DirectMLBackend(BackendBase):
    name: ClassVar[str] = "directml"
    #: check() is DirectML's own verdict (CreateOperator, CompileOperator): judged on validation
    validates: ClassVar[bool] = True
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option(
            "version",
            DEFAULT_DML_VERSION,
            "DirectML release installed by dmlconform directml setup",
            parse=_known_release,
        ),
        Option("dll", "", "path of a DirectML.dll to use instead of an installed release"),
        Option(
            "timeout", "120", "seconds one case may take before the runner is killed", parse=_positive_float
        ),
        Option(
            "feature_level",
            "auto",
            "the level to judge at (auto: the highest the DLL reports)",
            parse=_level_or_auto,
        ),
        Option(
            "wave_ops",
            "on",
            "whether the device reports D3D12 WaveOps to DirectML, which picks some FLOAT32 "
            "reductions by it (on: what every GPU reports; off: this stack's own answer, none)",
            choices=("on", "off"),
            parse=lambda t: t == "on",
            travels=True,
        ),
        Option(
            "half_precision",
            "no",
            "pass DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION",
            choices=("no", "yes"),
            parse=lambda t: t == "yes",
        ),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        try:
            self.stack = locate(self.options["version"], self.options["dll"] or None)
        except StackMissing as exc:
            raise BackendError(str(exc)) from None
        self.session: Session | None = None
        self.stack_info: dict[str, str] = {}
        self._open()
        atexit.register(self.close)

    # -- the runner ----------------------------------------------------------------------------

    def _open(self) -> None:
        """Start the runner and ask DirectML what it is; fails in one line if it cannot."""
        try:
            self.session = Session(self.stack, wave_ops=self.options["wave_ops"])
            self.stack_info, test = account(self.session, self.spec)
        except (RunnerError, OSError, RuntimeError) as exc:
            self.close()
            raise BackendError(f"backend 'directml': the runner did not start: {exc}") from None
        if not test.passed:
            self.close()
            raise BackendError(
                f"backend 'directml': the self-test failed, this stack computes garbage: {test.detail}"
            )
        seen = self.stack_info.get("wave_ops", "").split(":")[0]
        if seen != ("on" if self.options["wave_ops"] else "off"):
            self.close()
            raise BackendError(
                f"backend 'directml': wave_ops={'on' if self.options['wave_ops'] else 'off'} was asked "
                f"for, but DirectML sees wave ops {self.stack_info.get('wave_ops', 'unknown')}"
            )
        reported = self.stack_info.get("max_feature_level", "")
        if not reported:
            self.close()
            raise BackendError(
                "backend 'directml': DirectML reports no feature level (the device did not start)"
            )
        if self.options["feature_level"] == "auto":
            self.feature_level = reported
        elif self.spec.level(self.options["feature_level"]) > self.spec.level(reported):
            self.close()
            raise BackendError(
                f"backend 'directml': feature_level={self.options['feature_level']} is above "
                f"DirectML {self.stack.dml_version}'s maximum {reported}"
            )
        else:
            self.feature_level = self.options["feature_level"]

    def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()

    @property
    def _runner(self) -> Any:
        if self.session is None:
            raise RunnerError("the DirectML backend is closed")
        return self.session.runner

    # -- protocol ----------------------------------------------------------------------------

    def versions(self) -> dict[str, str]:
        return {
            **super().versions(),
            **{f"directml.{k}" if k != "directml" else k: v for k, v in self.stack_info.items()},
        }

    def describe(self) -> str:
        info = self.stack_info
        return (
            f"directml {info.get('directml', '?')} (feature level {self.feature_level}; "
            f"{info.get('adapter', '?')}; {info.get('vulkan_driver', '?')}; {info.get('wine', '?')}; "
            f"wave ops {info.get('wave_ops', '?')})"
        )

    def check(self, desc: OperatorDesc) -> None:
        own = self.stack_info.get("max_feature_level") or self.feature_level
        if own != self.feature_level:
            # DirectML validates at the level it implements, whatever level a device asks for
            # at least: a desc whose verdict changes between the two cannot be put to it.
            at_ours, at_its = validate(desc, self.feature_level, self.spec), validate(desc, own, self.spec)
            if {v.rule for v in at_ours} != {v.rule for v in at_its}:
                raise Unsupported(
                    f"DirectML {self.stack.dml_version} validates at {own}, where this desc's verdict "
                    f"differs from {self.feature_level}'s"
                )
        packed = self._pack(desc)
        reply = self._runner.run(
            MODE_COMPILE, packed.arena, packed.relocations, [], [], self.options["timeout"], self._flags()
        )
        if reply.ok:
            return
        _raise_for(reply)

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        packed = self._pack(desc)
        bound = sum(size for _, size in (*packed.inputs, *packed.outputs) if size != pack.NO_BINDING)
        if bound > MAX_BOUND_BYTES:
            self.check(desc)  # DirectML's verdict first: refusing 2^40 bytes needs no buffers
            raise Unsupported(
                f"bindings of {bound} bytes exceed the {MAX_BOUND_BYTES >> 30} GiB a case may send"
            )
        packed, reply = pack.execute(
            self._runner, desc, inputs, self.options["timeout"], self._flags(), spec=self.spec
        )
        self._last_info = {
            "directml_ms": {
                k: round(v, 3)
                for k, v in zip(
                    ("create", "compile", "init", "execute", "readback"), reply.timings_ms, strict=True
                )
            }
        }
        if not reply.ok:
            _raise_for(reply)
        return pack.outputs(packed, desc, reply)

    def _pack(self, desc: OperatorDesc) -> pack.Packed:
        try:
            return pack.pack(desc, self.spec)
        except (KeyError, ValueError) as exc:
            raise Unsupported(f"cannot pack this desc for DirectML: {exc}") from None

    def _flags(self) -> int:
        return ALLOW_HALF_PRECISION if self.options["half_precision"] else 0


#: The runner's stages (client.STAGES) as the stages a refusal or failure names (errors.STAGES):
#: CreateOperator, CompileOperator, and the initialization and dispatch of a compiled operator.
STAGE_NAMES = {1: "create", 2: "compile", 3: "execute", 4: "execute"}


def _raise_for(reply: RunReply) -> None:
    """A reply that did not get through: DirectML's refusal of the desc at CreateOperator or
    CompileOperator is Rejected (a verdict); another HRESULT returned by one of DirectML's stages
    is a Failure (a RuntimeError: that case's error, which the acceptance corpus keeps apart);
    anything else (a removed device, a bad request) is a plain RuntimeError. Both carry the stage
    and the HRESULT."""
    hresult = reply.hresult & 0xFFFFFFFF
    refusal = REFUSALS.get(hresult)
    stage = STAGE_NAMES.get(reply.stage)
    if refusal and reply.stage in (1, 2):
        raise Rejected(f"DirectML {reply.describe()} ({refusal})", stage=stage, hresult=hresult)
    if stage is not None and hresult & 0x80000000:
        raise Failure(f"DirectML {reply.describe()}", stage=stage, hresult=hresult)
    raise RuntimeError(f"DirectML {reply.describe()}")


def account(session: Session, spec: Any) -> tuple[dict[str, str], SelfTest]:
    """What the stack is and whether it computes: what the backend checks when it opens and
    ``dmlconform directml info`` prints."""
    return query_stack(session, spec), run_self_test(session.runner, spec)


def query_stack(session: Session, spec: Any, timeout: float = 180.0) -> dict[str, str]:
    """DirectML's own account of the stack (release, maximum feature level, FLOAT16, adapter)
    beside what setup installed (Wine, vkd3d, lavapipe)."""
    levels = sorted(spec.levels, key=lambda lv: lv.value, reverse=True)
    types = [spec.data_types[name].value for name in ("FLOAT32", "FLOAT16")]
    raw = session.runner.info([lv.value for lv in levels], types, timeout)
    by_value = {lv.value: lv.name for lv in levels}
    stack = session.stack.describe()
    return {
        "directml": stack.pop("directml"),
        "max_feature_level": by_value.get(int(raw.get("max_feature_level", "0"), 16), ""),
        "float16": "supported" if raw.get(f"data_type_{types[1]}") == "1" else "not supported",
        # Wine names a GPU of its own choosing; the device behind it is lavapipe
        "adapter": f"{raw.get('adapter', '?')} as Wine reports it",
        "wave_ops": wave_ops_text(raw),
        **stack,
    }


def wave_ops_text(raw: dict[str, str]) -> str:
    """What DirectML was told about wave operations (the runner's INFO lines), beside what the
    device itself says, e.g. "on: 32 lanes (the device itself: none)": a FLOAT32 reduction's
    result depends on it. It starts "on" only when DirectML really saw WaveOps, so a runner that
    failed to report them cannot pass for one that did."""

    def waves(prefix: str) -> str:
        said = raw.get(f"{prefix}wave_ops")
        if said != "1":
            return "none" if said == "0" else "unknown"
        low, high = raw.get(f"{prefix}wave_lanes_min", "?"), raw.get(f"{prefix}wave_lanes_max", "?")
        return f"{low if low == high else f'{low}-{high}'} lanes"

    seen = waves("")
    return f"{'on' if seen.endswith('lanes') else 'off'}: {seen} (the device itself: {waves('device_')})"
