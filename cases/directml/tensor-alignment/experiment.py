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

from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.errors import Rejected
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.model import load_spec
from dmlconform.specification.validate import validate

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
    disagreements = 0
    for version in versions:
        backend = DirectMLBackend(version=version)
        try:
            print(f"DirectML {version}")
            for data_type in ("FLOAT32", "FLOAT16"):
                for member in ("InputTensor", "OutputTensor"):
                    answers = []
                    for alignment in ALIGNMENTS:
                        d = desc(data_type, member, alignment)
                        legal = not validate(d, backend.feature_level, SPEC)
                        try:
                            backend.check(d)
                            accepted = True
                        except Rejected:
                            accepted = False
                        disagreements += legal != accepted
                        mark = "" if legal == accepted else " <- disagree"
                        answers.append(f"{alignment}:{'accepts' if accepted else 'refuses'}{mark}")
                    print(f"  {data_type} {member:<12} " + ", ".join(answers))
        finally:
            backend.close()
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
