"""Backends that support part of the family, for the coverage and selection tests.

Loaded as ``partial_backends:ClassName`` with the tests directory on the path."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Mapping

import numpy as np

from dmlconform.backends.reference import ReferenceBackend
from dmlconform.errors import Unsupported
from dmlconform.specification.desc import OperatorDesc


class Mvn1Only(ReferenceBackend):
    """The reference on MEAN_VARIANCE_NORMALIZATION1; Unsupported for every other operator."""

    name = "mvn1-only"

    def _only(self, desc: OperatorDesc) -> None:
        if desc.operator != "MEAN_VARIANCE_NORMALIZATION1":
            raise Unsupported(f"{desc.operator} is not implemented")

    def check(self, desc: OperatorDesc) -> None:
        self._only(desc)
        super().check(desc)

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._only(desc)
        return super().execute(desc, inputs)


#: weakrefs to the inputs every InputWatcher call received, and how many of an earlier call's
#: were still alive at each later call (the run's memory across cases)
SEEN: list[list[weakref.ref]] = []
STILL_ALIVE: list[int] = []


class InputWatcher(ReferenceBackend):
    """The reference, watching whether the inputs of earlier calls are still held by anyone."""

    name = "input-watcher"

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        gc.collect()
        STILL_ALIVE.append(sum(r() is not None for refs in SEEN for r in refs))
        SEEN.append([weakref.ref(v) for v in inputs.values() if isinstance(v, np.ndarray)])
        return super().execute(desc, inputs)
