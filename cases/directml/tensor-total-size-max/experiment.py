"""The largest TotalTensorSizeInBytes DirectML accepts: the experiment behind the inferred rule
tensor-total-size-max (spec/common/tensor_desc.yaml).

    python cases/directml/tensor-total-size-max/experiment.py [--version 1.15.4 ...]

The docs bound a tensor's element count (2^32 - 1) and its minimum buffer size; this asks where
the buffer size itself stops. Each TotalTensorSizeInBytes below, around (2^32 - 1) element sizes
and far past it, is given to the InputTensor, then to the OutputTensor, of a small FLOAT32 and
FLOAT16 MEAN_VARIANCE_NORMALIZATION1; then layouts whose implied size (no TotalTensorSizeInBytes
stated) lies around the limit. Each is put to CreateOperator; the answer is printed beside the
validator's verdict. Exit status 1 when a release and the validator disagree on any of them
(1.8.0 to 1.13.1 do, on a partial element past the limit: finding F16).
"""

from __future__ import annotations

import argparse
import sys

from dmlconform.releases.acceptance import experiment
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.spec import load_spec

SPEC = load_spec()
LIMIT = 2**32 - 1


def totals(element_size: int) -> list[int]:
    top = LIMIT * element_size
    return [2**32, top - 4, top - 1, top, top + 1, top + element_size, 2**34, 2**40, 2**63]


def desc(data_type: str, member: str, total: int):
    tensors = {m: {"DataType": data_type, "Sizes": [1, 2, 3, 4]} for m in ("InputTensor", "OutputTensor")}
    tensors[member]["TotalTensorSizeInBytes"] = total
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {**tensors, "AxisCount": 1, "Axes": [3], "NormalizeVariance": True, "Epsilon": 1e-5},
        }
    )


def implied(data_type: str, sizes: list[int], strides: list[int] | None):
    """TotalTensorSizeInBytes omitted: DirectML takes the minimum implied size."""
    tensor = {"DataType": data_type, "Sizes": sizes}
    layout = {**tensor, "Strides": strides} if strides else tensor
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": layout,
                "OutputTensor": tensor,
                "AxisCount": 1,
                "Axes": [3],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )


# (label, data type, Sizes, InputTensor Strides): spans around 2^32 - 1 elements, no size stated
IMPLIED = [
    ("FLOAT32 span 2^32 - 1", "FLOAT32", [2, 1, 1, 4], [2**32 - 5, 4, 4, 1]),
    ("FLOAT32 span 2^32", "FLOAT32", [2, 1, 1, 4], [2**32 - 4, 4, 4, 1]),
    ("FLOAT16 span 2^32 - 2", "FLOAT16", [2, 1, 1, 4], [2**32 - 6, 4, 4, 1]),
    ("FLOAT16 span 2^32 - 1", "FLOAT16", [2, 1, 1, 4], [2**32 - 5, 4, 4, 1]),
    ("FLOAT16 packed 2^32 - 2 elements", "FLOAT16", [1, 1, 2, 2**31 - 1], None),
    ("FLOAT16 packed 2^32 - 1 elements", "FLOAT16", [1, 1, 65535, 65537], None),
    ("FLOAT32 packed 2^32 - 1 elements", "FLOAT32", [1, 1, 65535, 65537], None),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    versions = parser.parse_args().version or ["1.15.4"]
    labelled = [
        (f"{data_type} {member} TotalTensorSizeInBytes {total}", desc(data_type, member, total))
        for data_type, size in (("FLOAT32", 4), ("FLOAT16", 2))
        for member in ("InputTensor", "OutputTensor")
        for total in totals(size)
    ] + [(f"{label}, TotalTensorSizeInBytes omitted", implied(*layout)) for label, *layout in IMPLIED]
    return 1 if experiment(versions, labelled, SPEC) else 0


if __name__ == "__main__":
    sys.exit(main())
