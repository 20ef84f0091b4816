"""Backends that support part of the family, for the coverage and selection tests.

Loaded as ``partial_backends:ClassName`` with the tests directory on the path."""

from __future__ import annotations

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
