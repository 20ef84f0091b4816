"""OpenVINO's CPU plugin computes a normalization over an empty axes list wrongly for 2-D and
for 6-D and larger inputs.

Over no axes every slice is one element: its mean is the element, its variance 0, so MVN-6 gives
0 (DirectML: 0 * Scale + Bias), and ReduceMean gives the input. MVN-6's own evaluate (the
operator's reference implementation) gives 0. The CPU plugin:
- 2-D input: its MVN node returns the input unchanged, and values up to 1e17 when the same
  model also takes ReduceMean of that input (as a batch normalization returning its statistics
  does);
- 1-D, 3-D, 4-D, 5-D: the plugin decomposes MVN-6 into ReduceMean and elementwise nodes and gets 0;
- 6-D and more: ReduceMean over no axes keeps some elements and zeroes the others, and so does
  the MVN-6 built on it.
DirectML's BATCH_NORMALIZATION_TRAINING reduces over the dimensions where Scale's size is 1: a
Scale of the input's own sizes reduces over none. Uses openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV3 to it)
CASE = {
    "type": "BATCH_NORMALIZATION_TRAINING",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 6]},
        "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [2, 6]},
        "BiasTensor": {"DataType": "FLOAT32", "Sizes": [2, 6]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 6]},
        "Epsilon": 0.001,
    },
}

NO_AXES = np.array([], np.int64)


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's inputs: standard-normal Input, Scale 1, Bias 0.5 (the answer is 0.5 everywhere)."""
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    return {"InputTensor": x, "ScaleTensor": np.ones_like(x), "BiasTensor": np.full_like(x, 0.5)}


def run(shape: tuple[int, ...], x: np.ndarray, with_mean: bool = True) -> tuple[np.ndarray, ...]:
    """MVN-6 over no axes, with ReduceMean over no axes of the same input beside it or not."""
    p = ops.parameter(list(shape), np.float32)
    outs = [ops.mvn(p, ops.constant(NO_AXES), True, 1e-3, "inside_sqrt")]
    if with_mean:
        outs.append(ops.reduce_mean(p, ops.constant(NO_AXES), True))
    compiled = ov.Core().compile_model(ov.Model(outs, [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x]).to_tuple()


def main() -> None:
    print(f"openvino {ov.get_version()}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    node = ops.mvn(ops.constant(x), ops.constant(NO_AXES), True, 1e-3, "inside_sqrt")
    out = [ov.Tensor(np.zeros_like(x))]
    node.evaluate(out, [ov.Tensor(x), ov.Tensor(NO_AXES)])
    evaluate_right = not np.abs(out[0].data).max()
    print(
        f"MVN-6 over no axes, [2, 6], its own evaluate: max |y| = {np.abs(out[0].data).max():.3g} (the answer: 0)"
    )
    wrong_dims = set()
    print("MVN-6 and ReduceMean (keep_dims) over no axes of one input, in one model:")
    print("dims  shape                  MVN-6: max |y| (want 0)   ReduceMean: max |mean - x| (want 0)")
    for shape in [
        (6,),
        (2, 6),
        (6, 2, 7),
        (2, 3, 4, 5),
        (2, 3, 2, 2, 2),
        (2, 3, 2, 2, 2, 2),
        (3, 2, 2, 1, 2, 2, 1),
        (1, 1, 2, 1, 1, 1, 2, 3),
    ]:
        x = rng.standard_normal(shape).astype(np.float32)
        mvn, mean = run(shape, x)
        print(f"{len(shape):<5} {str(shape):<22} {np.abs(mvn).max():<25.3g} {np.abs(mean - x).max():.3g}")
        if np.abs(mvn).max() > 0:
            wrong_dims.add(len(shape))
    x = rng.standard_normal((2, 6)).astype(np.float32)
    unchanged = bool(np.array_equal(run((2, 6), x, False)[0], x))
    print("[2, 6], MVN-6 alone: returns its input unchanged:", unchanged)
    reproduced = evaluate_right and unchanged and wrong_dims == {2, 6, 7, 8}
    print("OV3 reproduced" if reproduced else "OV3 not reproduced")


if __name__ == "__main__":
    main()
