"""OpenVINO's CPU SoftPlus-4 errs by about one float32 ULP of |x| absolute for x < 0, where the
answer ln(1 + e^x) is about e^x: relative error grows like e^-x, and the result even goes
negative.

float32 SoftPlus over x in [-30, 0], against ln(1 + e^x) in float64. A sound float32 softplus
(log1p(exp(x)) for x < 0) errs about 1 ULP of its result; the plugin's error is a few ULPs of
x itself (the absolute error / spacing(x) column), as computing x + ln(1 + e^-x) would. DirectML's
SOFTPLUS and PARAMETRIC_SOFTPLUS are ln(1 + exp(k x)) scaled, so a normalized output far below
0 under these activations shows it. Uses openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV4 to it)
CASE = {
    "type": "MEAN_VARIANCE_NORMALIZATION2",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]},
        "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]},
        "AxisCount": 2,
        "Axes": [2, 3],
        "UseMean": True,
        "UseVariance": True,
        "Epsilon": 1e-5,
        "FusedActivation": {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 1.0},
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's inputs: standard-normal slices, Scale 6: values before SOFTPLUS down to about -15."""
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    return {"InputTensor": x, "ScaleTensor": np.full((1, 3, 1, 1), 6.0, np.float32)}


def main() -> None:
    print(f"openvino {ov.get_version()}")
    x = np.linspace(-30, 0, 300001).astype(np.float32)
    p = ops.parameter([x.size], np.float32)
    compiled = ov.Core().compile_model(
        ov.Model([ops.softplus(p)], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    got = compiled([x])[0].astype(np.float64)
    x64 = x.astype(np.float64)
    want = np.log1p(np.exp(x64))
    sound = np.log1p(np.exp(x)).astype(np.float64)  # numpy's float32 log1p(exp(x))
    err, err_sound = np.abs(got - want), np.abs(sound - want)
    print("x range      max abs error  / spacing(x)  / spacing(answer)   sound float32: / spacing(answer)")
    for lo, hi in [(-30, -20), (-20, -10), (-10, -5), (-5, -2), (-2, -1), (-1, 0)]:
        m = (x64 >= lo) & (x64 < hi)
        ulp_x = (err[m] / np.spacing(np.abs(x[m]))).max()
        ulp_y = (err[m] / np.spacing(want[m].astype(np.float32))).max()
        ulp_sound = (err_sound[m] / np.spacing(want[m].astype(np.float32))).max()
        print(
            f"[{lo}, {hi})".ljust(12), f"{err[m].max():<14.3g} {ulp_x:<13.3g} {ulp_y:<19.3g} {ulp_sound:.3g}"
        )
    i = int(np.argmax(err))
    print(f"worst: x = {x[i]:.6g}: OpenVINO {got[i]:.6g}, ln(1 + e^x) = {want[i]:.6g}")
    far = x64 < -5
    reproduced = (err[far] / np.spacing(np.abs(x[far]))).max() < 4 and got[i] < 0 < want[i]
    print("OV4 reproduced" if reproduced else "OV4 not reproduced")


if __name__ == "__main__":
    main()
