"""Where DirectML's FLOAT16 error comes from: DirectML's shaders, or the DXBC -> SPIR-V -> lavapipe
translation under Wine (findings F1 and F6, docs/directml-conformance.md).

    python cases/directml/float16-origin/experiment.py [--version 1.15.4 ...]

Three measurements per release, each against a model computed here in numpy:

1. DML_OPERATOR_CAST FLOAT32 -> FLOAT16 over every FLOAT16 value, the midpoints between
   neighbours, the float32 values next to them and 400,000 random values: how the stack converts.
   Round-to-nearest-even is what numpy (and IEEE 754) do; round-toward-zero is truncation.
2. BATCH_NORMALIZATION FLOAT16 (64 x 64, per-column statistics): is DirectML's output the float32
   computation converted once (by the stack's conversion)?
3. MEAN_VARIANCE_NORMALIZATION1 FLOAT16 over 40 elements per slice, data of mean ~51 and std
   ~1.75: which model of DirectML's shader reproduces its output bit for bit, and what the same
   shader would give on a stack whose conversion rounds to nearest even.

CAST is not one of the suite's operators, so its desc is packed here by hand from the packer's
tensor layout: DML_CAST_OPERATOR_DESC {InputTensor, OutputTensor}, DML_OPERATOR_CAST = 61 in
DirectML.h's enum (BATCH_NORMALIZATION, 72 in the spec, is eleven entries further).
"""

from __future__ import annotations

import argparse
import struct

import numpy as np

from dmlconform.backends.directml import pack, stack
from dmlconform.backends.directml.client import MODE_EXECUTE
from dmlconform.specification.desc import TensorDesc, parse_desc
from dmlconform.specification.spec import load_spec

OPERATOR_CAST = 61
SPEC = load_spec()


def rtz16(x: np.ndarray) -> np.ndarray:
    """float32 -> float16 rounding toward zero."""
    x = np.asarray(x, np.float32)
    r = x.astype(np.float16)
    over = np.abs(r.astype(np.float32)) > np.abs(x)
    return np.where(over, np.nextafter(r, np.float16(0)), r).astype(np.float16)


def rne16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(np.float16)


def ulps(got: np.ndarray, exact: np.ndarray) -> float:
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - exact) / spacing))


def same(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a.view(np.uint16) == b.view(np.uint16)))


def cast(runner, x: np.ndarray, src: str, dst: str) -> np.ndarray:
    n = x.size
    arena = pack.Arena()
    root = arena.reserve(16, 8)
    tensors = [pack._tensor(arena, TensorDesc(dt, (n,)), SPEC) for dt in (src, dst)]
    body = arena.struct([("ptr", t) for t in tensors])
    struct.pack_into("<IIQ", arena.data, root, OPERATOR_CAST, 0, body)
    arena.relocations.append(root + 8)
    out_type = np.float16 if dst == "FLOAT16" else np.float32
    data = pack.input_buffer(x, TensorDesc(src, (n,)), x.nbytes)
    reply = runner.run(
        MODE_EXECUTE,
        bytes(arena.data),
        tuple(arena.relocations),
        [data],
        [n * np.dtype(out_type).itemsize],
        120,
        0,
        [False],
    )
    if not reply.ok:
        raise RuntimeError(f"CAST: {reply.describe()}")
    return np.frombuffer(reply.outputs[0], dtype=out_type)


def cast_experiment(runner) -> str:
    rng = np.random.default_rng(0)
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (halves[:-1] + halves[1:]) / 2
    m32 = mid.astype(np.float32)
    xs = np.concatenate(
        [
            halves,
            mid,
            np.nextafter(m32, np.float32(np.inf)),
            np.nextafter(m32, np.float32(-np.inf)),
            rng.standard_normal(200_000) * rng.choice([1e-6, 1e-3, 1, 10, 1000], 200_000),
        ]
    )
    xs = np.concatenate([xs, -xs]).astype(np.float32)
    got = cast(runner, xs, "FLOAT32", "FLOAT16")
    inexact = xs.astype(np.float16).astype(np.float32) != xs
    differ = got.view(np.uint16) != xs.astype(np.float16).view(np.uint16)
    truncated = bool((got.view(np.uint16) == rtz16(xs).view(np.uint16)).all())
    back = cast(runner, xs.astype(np.float16), "FLOAT16", "FLOAT32")
    return (
        f"CAST FLOAT32->FLOAT16: {xs.size} values, {int(inexact.sum())} inexact, {int(differ.sum())} differ "
        f"from round-to-nearest-even; every one equal to round-toward-zero: {truncated}. "
        f"FLOAT16->FLOAT32 exact: {bool((back == xs.astype(np.float16).astype(np.float32)).all())}"
    )


def batch_norm_experiment(backend) -> str:
    def t(sizes):
        return {"DataType": "FLOAT16", "Sizes": sizes}

    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION",
            "desc": {
                "InputTensor": t([64, 64]),
                **{k: t([1, 64]) for k in ("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor")},
                "OutputTensor": t([64, 64]),
                "Spatial": False,
                "Epsilon": 1e-3,
            },
        }
    )
    rng = np.random.default_rng(3)
    inputs = {
        "InputTensor": rng.standard_normal((64, 64)).astype(np.float16),
        "MeanTensor": (rng.standard_normal((1, 64)) * 0.5).astype(np.float16),
        "VarianceTensor": (rng.random((1, 64)) + 0.5).astype(np.float16),
        "ScaleTensor": rng.standard_normal((1, 64)).astype(np.float16),
        "BiasTensor": rng.standard_normal((1, 64)).astype(np.float16),
    }
    f = {k: v.astype(np.float32) for k, v in inputs.items()}
    y32 = (f["InputTensor"] - f["MeanTensor"]) / np.sqrt(f["VarianceTensor"] + np.float32(1e-3))
    y32 = y32 * f["ScaleTensor"] + f["BiasTensor"]
    got = backend.execute(desc, inputs)["OutputTensor"]
    return (
        f"BATCH_NORMALIZATION FLOAT16 (4096 elements): equal to the float32 result rounded toward zero: "
        f"{same(got, rtz16(y32)):.1%}; rounded to nearest even: {same(got, rne16(y32)):.1%}"
    )


def mvn1_experiment(backend) -> str:
    shape, axes = (4, 6, 40), (2,)
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT16", "Sizes": list(shape)},
                "OutputTensor": {"DataType": "FLOAT16", "Sizes": list(shape)},
                "Axes": list(axes),
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )
    x = (np.random.default_rng(5).standard_normal(shape) * 1.75 + 51).astype(np.float16)
    x32, x64 = x.astype(np.float32), x.astype(np.float64)
    exact = (x64 - x64.mean(axis=axes, keepdims=True)) / np.sqrt(x64.var(axis=axes, keepdims=True) + 1e-5)
    eps = np.float32(1e-5)

    def shader(round16):
        """float32 arithmetic, mean and variance stored as FLOAT16, the output converted."""
        mean = round16(x32.mean(axis=axes, keepdims=True, dtype=np.float32)).astype(np.float32)
        centred = x32 - mean
        var = round16(np.mean(centred * centred, axis=axes, keepdims=True, dtype=np.float32))
        return round16(centred / np.sqrt(var.astype(np.float32) + eps))

    m32 = x32.mean(axis=axes, keepdims=True, dtype=np.float32)
    float32_statistics = rne16(
        (x32 - m32) / np.sqrt(np.mean((x32 - m32) ** 2, axis=axes, keepdims=True) + eps)
    )
    got = backend.execute(desc, {"InputTensor": x})["OutputTensor"]
    return (
        f"MEAN_VARIANCE_NORMALIZATION1 FLOAT16 (mean ~51, std ~1.75, 960 elements): {ulps(got, exact):.0f} ULP "
        f"from exact; equal to 'statistics stored as FLOAT16, conversions toward zero': "
        f"{same(got, shader(rtz16)):.1%}. The same shader on a round-to-nearest-even stack: "
        f"{ulps(shader(rne16), exact):.0f} ULP; float32 statistics, one rounding: "
        f"{ulps(float32_statistics, exact):.2f} ULP"
    )


def main() -> None:
    from dmlconform.backends.directml.backend import DirectMLBackend

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    args = parser.parse_args()
    for version in args.version or ["1.15.4"]:
        print(f"DirectML {version}")
        with stack.Session(stack.locate(version)) as session:
            print("  " + cast_experiment(session.runner))
        backend = DirectMLBackend(version=version)
        try:
            print("  " + batch_norm_experiment(backend))
            print("  " + mvn1_experiment(backend))
        finally:
            backend.close()


if __name__ == "__main__":
    main()
