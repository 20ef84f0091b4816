"""What an OpenVINO user who decomposes the operators still gets from the CPU plugin: the
plugin's own kernels, and their findings.

1. log(exp(x) + 1) written out of Exp, Add and Log is compiled into SoftPlus (the plugin's
   SoftPlus fusion): its output equals SoftPlus-4's bit for bit, with SoftPlus's loss below 0
   (OV4), 13 % off at x = -12 where a float32 log1p(exp(x)) errs a few ULP.
2. ReduceSum over no axes of a 7-D input, which should return its input, returns 0 for most
   elements (OV3's ReduceMean, for ReduceSum): a batch-norm gradient built from ReduceSum over a
   one-element batch gives 0 where the answer is dy.

Run: python cases/openvino/decomposed-graphs/experiment.py (openvino and numpy only).
"""

import numpy as np
import openvino as ov
import openvino.opset13 as ops

core = ov.Core()
print(f"openvino {ov.__version__}")


def run(build, a):
    p = ops.parameter(list(a.shape), ov.Type.f32)
    model = ov.Model([ops.result(build(p.output(0)))], [p])
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([a])[compiled.outputs[0]]


z = np.linspace(-12, -2, 4001).astype(np.float32)
composed = run(lambda x: ops.log(ops.add(ops.exp(x), ops.constant(np.float32(1)))), z)
softplus = run(lambda x: ops.softplus(x), z)
want = np.log1p(np.exp(z.astype(np.float64)))
fused = np.array_equal(composed, softplus)
rel = np.abs(composed / want - 1)
print(f"1. log(exp(x) + 1) equals SoftPlus bit for bit: {fused}")
print(f"   relative error over x in [-12, -2]: max {rel.max():.3g} (at x = {z[rel.argmax()]:.2f})")
print(f"   float32 log1p(exp(x)) in numpy:      max {np.abs(np.log1p(np.exp(z)) / want - 1).max():.3g}")

a = np.random.default_rng(0).standard_normal((5, 3, 3, 5, 3, 2, 3)).astype(np.float32)
got = run(lambda t: ops.reduce_sum(t, ops.constant(np.zeros(0, np.int64)), keep_dims=True), a)
zeros = int(np.count_nonzero(got == 0))
print(
    f"2. ReduceSum over no axes of a {a.ndim}-D input: {zeros} of {a.size} elements 0 (should equal the input)"
)
for rank in (3, 4, 5, 6):
    b = a.reshape(a.shape[: rank - 1] + (-1,))
    ok = np.array_equal(
        run(lambda t: ops.reduce_sum(t, ops.constant(np.zeros(0, np.int64)), keep_dims=True), b), b
    )
    print(f"   {rank}-D: equals the input: {ok}")

print("reproduced" if fused and rel.max() > 1e-2 and zeros > a.size // 2 else "not reproduced")
