"""Which GuaranteedBaseOffsetAlignment values DirectML accepts: the experiment behind
tensor-alignment's minimum of 16 (spec/common/tensor_desc.yaml).

    python cases/directml/tensor-alignment/experiment.py [--version 1.15.4 ...]

The DML_BUFFER_TENSOR_DESC page asks for 0 or a power of two at least the element size; the
DirectML constants page says buffer tensors have a minimum base address alignment of 16 bytes
(DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT). Each value below is given to the InputTensor, then to the
OutputTensor, of an otherwise legal FLOAT32 and FLOAT16 MEAN_VARIANCE_NORMALIZATION1 and put to
CreateOperator; the answer is printed beside the validator's verdict. Exit status 1 when a
release and the validator disagree on any of them.
"""

from __future__ import annotations

import argparse
import sys

from dmlconform.releases.acceptance import experiment
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.spec import load_spec

SPEC = load_spec()
ALIGNMENTS = [0, 1, 2, 4, 8, 12, 16, 24, 32, 256, 1 << 31]


def desc(data_type: str, member: str, alignment: int):
    tensors = {m: {"DataType": data_type, "Sizes": [2, 3, 4, 5]} for m in ("InputTensor", "OutputTensor")}
    tensors[member]["GuaranteedBaseOffsetAlignment"] = alignment
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {**tensors, "AxisCount": 2, "Axes": [2, 3], "NormalizeVariance": True, "Epsilon": 1e-5},
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    versions = parser.parse_args().version or ["1.15.4"]
    labelled = [
        (
            f"{data_type} {member} GuaranteedBaseOffsetAlignment {alignment}",
            desc(data_type, member, alignment),
        )
        for data_type in ("FLOAT32", "FLOAT16")
        for member in ("InputTensor", "OutputTensor")
        for alignment in ALIGNMENTS
    ]
    return 1 if experiment(versions, labelled, SPEC) else 0


if __name__ == "__main__":
    sys.exit(main())
