"""The ``reference`` backend: the float64 reference executor behind the backend protocol.

Running the suite against it is the suite's own sanity check (every numeric case must pass
with zero error, every illegal desc must be rejected with the right rule), and it lets the
metamorphic and validation items be exercised without any third-party library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, Option, validate_or_reject


class ReferenceBackend(BackendBase):
    """Wraps ``dmlconform.execute``; ``check`` is the spec validator at ``feature_level``."""

    name: ClassVar[str] = "reference"
    OPTIONS: ClassVar[tuple[Option, ...]] = (FEATURE_LEVEL_OPTION,)
    #: check() below rejects every desc illegal at feature_level: run the validation cases
    validates: ClassVar[bool] = True

    def check(self, desc: dc.OperatorDesc) -> None:
        validate_or_reject(desc, self.feature_level, self.spec)

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = dc.execute(desc, dict(inputs), spec=self.spec)
        self._last_info = {"path": "reference", "compute_dtype": "float64"}
        # The reference already returns each output in its DataType and Sizes; hold the
        # protocol's contract anyway (contiguous, own memory), without changing any value.
        return dc.plan(desc, self.spec).finish(outputs)

    def versions(self) -> dict[str, str]:
        out = super().versions()
        try:
            import numba

            out["numba"] = numba.__version__
        except ImportError:  # pragma: no cover - numba is a hard dependency
            pass
        return out

    def describe(self) -> str:
        return f"dmlconform float64 reference executor (feature level {self.feature_level})"
