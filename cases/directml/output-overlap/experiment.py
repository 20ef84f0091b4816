"""Which output layouts DirectML accepts: the experiment behind the inferred rule
tensor-output-span (spec/common/tensor_desc.yaml).

    python cases/directml/output-overlap/experiment.py [--version 1.15.4 ...]

Each layout below is put to DirectML's CreateOperator and CompileOperator as the OutputTensor of
an otherwise legal MEAN_VARIANCE_NORMALIZATION1 and BATCH_NORMALIZATION desc, and the answer is
printed beside the validator's verdict. The docs allow a stride of 0 (broadcast) and larger strides
(padding) without saying whether an output may use them; the layouts separate the readings (no
overlap at all, or no more elements than slots): broadcast outputs, outputs that overlap within
fewer slots than elements, outputs that overlap within more (DirectML accepts these), one slot
short of packed, a TotalTensorSizeInBytes far above the span, an interleaved output whose offsets
are all distinct, a zero stride on a dimension of size 1, padded and permuted outputs.
Exit status 1 when a release and the validator disagree on any of them.
"""

from __future__ import annotations

import argparse
import sys

from dmlconform.releases.acceptance import experiment
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.spec import load_spec

SPEC = load_spec()

# (name, Sizes, output Strides)
LAYOUTS = [
    ("broadcast everywhere", [1, 2, 3, 4], [0, 0, 0, 1]),
    ("broadcast one dimension", [1, 2, 3, 4], [12, 0, 4, 1]),
    ("broadcast the last dimension", [1, 2, 3, 4], [12, 6, 2, 0]),
    ("two dimensions one stride", [1, 2, 3, 4], [24, 1, 1, 1]),
    ("a row shorter than its length", [1, 2, 3, 4], [24, 12, 3, 1]),
    ("interleaved, one offset shared", [1, 1, 3, 2], [8, 8, 1, 2]),
    ("interleaved, offsets distinct", [1, 1, 3, 2], [8, 8, 2, 3]),
    ("zero stride on a size-1 dimension", [1, 2, 3, 4], [0, 12, 4, 1]),
    ("padded", [1, 2, 3, 4], [100, 40, 10, 1]),
    ("permuted", [1, 2, 3, 4], [24, 1, 2, 6]),
    ("overlapping, span 297 for 120", [2, 3, 4, 5], [200, 40, 4, 1]),
    ("overlapping blocks, span 29 for 20", [1, 2, 5, 2], [0, 20, 1, 4]),
    ("one slot short of packed", [2, 3, 4, 5], [59, 20, 5, 1]),
    ("packed, given as strides", [2, 3, 4, 5], [60, 20, 5, 1]),
]
# (name, Sizes, output Strides, TotalTensorSizeInBytes): the size a desc states does not count
WITH_TOTAL = [("rows shorter than their length, 4000 bytes", [1, 2, 3, 4], [24, 12, 3, 1], 4000)]


def descs(sizes: list[int], strides: list[int], total: int | None = None) -> list[dict]:
    channels = [1, sizes[1], 1, 1]
    output = {"DataType": "FLOAT32", "Sizes": sizes, "Strides": strides}
    if total is not None:
        output["TotalTensorSizeInBytes"] = total
    mvn1 = {
        "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
        "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": sizes},
            "OutputTensor": output,
            "AxisCount": 1,
            "Axes": [3],
            "NormalizeVariance": True,
            "Epsilon": 1e-5,
        },
    }
    batch_norm = {
        "type": "DML_OPERATOR_BATCH_NORMALIZATION",
        "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": sizes},
            **{m: {"DataType": "FLOAT32", "Sizes": channels} for m in ("MeanTensor", "VarianceTensor")},
            **{m: {"DataType": "FLOAT32", "Sizes": channels} for m in ("ScaleTensor", "BiasTensor")},
            "OutputTensor": output,
            "Spatial": True,
            "Epsilon": 1e-5,
        },
    }
    return [mvn1, batch_norm]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    versions = parser.parse_args().version or ["1.15.4"]
    labelled = []
    for name, sizes, strides, total in [(*layout, None) for layout in LAYOUTS] + WITH_TOTAL:
        for raw in descs(sizes, strides, total):
            desc = parse_desc(raw)
            labelled.append((f"{desc.operator} Sizes {sizes} Strides {strides}: {name}", desc))
    return 1 if experiment(versions, labelled, SPEC) else 0


if __name__ == "__main__":
    sys.exit(main())
