"""OpenVINO's CPU plugin mishandles a FLOAT16 GroupNormalization-12 of a 2-D input unless the
model is compiled with INFERENCE_PRECISION_HINT f32 (what the backend does by default).

GroupNormalization over [N, C] with one group is a layer normalization over the channels, what
DirectML's MEAN_VARIANCE_NORMALIZATION1 computes over Axes [1] of a 2-D input. Per hint:
- f32: compiles and is right (FLOAT16 rounding);
- bf16, or none on a CPU with AVX-512 BF16 (where the plugin's default is bf16): with a
  constant scale the plugin runs part of the graph in bf16 and normalizes only the first row
  (the others come back as the input, rounded to bf16); with a scale that is a model input,
  compile_model raises from its snippets code generator ("LoopPort dim_idx (1) must be less
  than the corresponding expression port shape rank (1)");
- f16: compile_model raises ("Cannot fallback on ngraph reference implementation").
3-D and 4-D inputs are right with every hint. Not a known finding: no case fails with the
backend's default options (``inference_precision=f32``); ``inference_precision=plugin`` shows
it on such a CPU. Uses openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this shows (with the backend option inference_precision=plugin or bf16)
CASE = {
    "type": "MEAN_VARIANCE_NORMALIZATION1",
    "desc": {
        "InputTensor": {"DataType": "FLOAT16", "Sizes": [3, 5]},
        "ScaleTensor": {"DataType": "FLOAT16", "Sizes": [1, 5]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [3, 5]},
        "AxisCount": 1,
        "Axes": [1],
        "NormalizeVariance": True,
        "Epsilon": 1e-5,
    },
}


def attempt(shape: tuple[int, ...], hint: str | None, scale: str) -> str:
    """Compile and run a FLOAT16 GroupNormalization (one group) of ``shape``; what happened."""
    channels = shape[1]
    x = ops.parameter(list(shape), np.float16)
    params = [x]
    if scale == "input":
        s = ops.parameter([channels], np.float16)
        params.append(s)
    else:
        s = ops.constant(np.ones(channels, np.float16))
    y = ops.group_normalization(x, s, ops.constant(np.zeros(channels, np.float16)), 1, 1e-5)
    config = {} if hint is None else {"INFERENCE_PRECISION_HINT": hint}
    try:
        compiled = ov.Core().compile_model(ov.Model([y], params), "CPU", config)
    except RuntimeError as exc:
        return "compile fails: " + str(exc).strip().splitlines()[-1][:90]
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float16)
    feed = [data] + ([np.ones(channels, np.float16)] if scale == "input" else [])
    got = compiled(feed)[0].astype(np.float64)
    rows = data.astype(np.float64).reshape(shape[0], -1)
    want = ((rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + 1e-5)).reshape(shape)
    return f"max |error| {np.abs(got - want).max():.3g}"


def main() -> None:
    core = ov.Core()
    print(
        f"openvino {ov.get_version()}; CPU capabilities {core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES')}"
    )
    print(
        f"the plugin's default INFERENCE_PRECISION_HINT here: {core.get_property('CPU', 'INFERENCE_PRECISION_HINT')}"
    )
    for hint in ("f32", None, "bf16", "f16"):
        for shape in ((3, 5), (3, 5, 2)):
            for scale in ("constant", "input"):
                print(
                    f"hint {hint or 'none':<5} {str(shape):<10} scale {scale:<9} {attempt(shape, hint, scale)}"
                )


if __name__ == "__main__":
    main()
