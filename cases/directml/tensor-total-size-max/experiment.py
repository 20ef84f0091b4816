"""The largest TotalTensorSizeInBytes DirectML accepts: the experiment behind the inferred rule
tensor-total-size-max (spec/common/tensor_desc.yaml).

    python cases/directml/tensor-total-size-max/experiment.py [--version 1.15.4 ...]

The docs bound a tensor's element count (2^32 - 1) and its minimum buffer size; this asks where
the buffer size itself stops. Each TotalTensorSizeInBytes below, around (2^32 - 1) element sizes
and far past it, is given to the InputTensor, then to the OutputTensor, of a small FLOAT32 and
FLOAT16 MEAN_VARIANCE_NORMALIZATION1 and put to CreateOperator; the answer is printed beside the
validator's verdict. Exit status 1 when a release and the validator disagree on any of them.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    versions = parser.parse_args().version or ["1.15.4"]
    disagreements = 0
    for version in versions:
        backend = DirectMLBackend(version=version)
        try:
            print(f"DirectML {version}")
            for data_type, size in (("FLOAT32", 4), ("FLOAT16", 2)):
                for member in ("InputTensor", "OutputTensor"):
                    answers = []
                    for total in totals(size):
                        d = desc(data_type, member, total)
                        legal = not validate(d, backend.feature_level, SPEC)
                        try:
                            backend.check(d)
                            accepted = True
                        except Rejected:
                            accepted = False
                        disagreements += legal != accepted
                        mark = "" if legal == accepted else " <- disagree"
                        answers.append(f"{total}:{'accepts' if accepted else 'refuses'}{mark}")
                    print(f"  {data_type} {member:<12} " + ", ".join(answers))
        finally:
            backend.close()
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
