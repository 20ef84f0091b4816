"""Fixtures shared by the test modules."""

from __future__ import annotations

import contextlib
import importlib

import pytest


@pytest.fixture(scope="session", autouse=True)
def native_modules_loaded() -> None:
    """Load numba's lazily imported modules and the native backends before any in-process run.

    pytester's in-process runs restore ``sys.modules`` when the test ends, deleting every module
    first imported during the test. A second import of such a module breaks the process: numba's
    typing modules ("duplicate registration"), torch's C extension ("bad call flags"), onnx's
    protobuf extension (abort). A session fixture is set up before the function-scoped
    ``pytester`` takes its snapshot, so what is loaded here stays loaded. It is autouse because
    which test first imports a library depends on how xdist spreads the tests over workers."""
    import numpy as np

    from dmlconform.reference import execute
    from dmlconform.specification.desc import parse_desc

    t = {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "NormalizeVariance": True},
        }
    )
    execute(desc, {"InputTensor": np.ones((1, 1, 2, 2), np.float32)})
    for name in (
        "torch",
        "onnx",
        "onnxruntime",
        "dmlconform.backends.torch_backend",
        "dmlconform.backends.onnxruntime_backend",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
