"""Fixtures shared by the test modules."""

from __future__ import annotations

import contextlib
import importlib

import pytest


@pytest.fixture(scope="session")
def native_modules_loaded() -> None:
    """Load numba's lazily imported modules and torch / onnxruntime before any in-process run.

    pytester's in-process runs restore ``sys.modules`` when the test ends, deleting every module
    first imported during the test. numba imports some typing modules at the first kernel load,
    and a second import of those (or of torch's C extension) breaks the process ("duplicate
    registration", "bad call flags"). A session fixture is set up before the function-scoped
    ``pytester`` takes its snapshot, so what is loaded here stays loaded."""
    import numpy as np

    from dmlconform.desc import parse_desc
    from dmlconform.reference import execute

    t = {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "NormalizeVariance": True},
        }
    )
    execute(desc, {"InputTensor": np.ones((1, 1, 2, 2), np.float32)})
    for name in ("torch", "onnxruntime"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
