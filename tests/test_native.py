"""numba's set-up (dmlconform.native): 512-bit vectors where the CPU runs them at full clock, the
user's own NUMBA_CPU_* settings left alone, and results that do not depend on the vector width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import pytest
from numba.core import codegen, config

from dmlconform import native

ROOT = Path(__file__).resolve().parent.parent
HOST_NAME = llvm.get_host_cpu_name()
HOST_FEATURES = codegen.get_host_cpu_features()
WIDENED = native.wide_vector_features(HOST_NAME, HOST_FEATURES) is not None


def test_wide_vectors_only_on_avx512_cpus_that_keep_their_clock() -> None:
    features = "+avx2,+avx512f,+fma"
    assert native.wide_vector_features("sapphirerapids", features) == features + ",-prefer-256-bit"
    assert native.wide_vector_features("znver4", features) == features + ",-prefer-256-bit"
    assert native.wide_vector_features("skylake-avx512", features) is None  # downclocks
    assert native.wide_vector_features("cascadelake", features) is None
    assert native.wide_vector_features("haswell", "+avx2,-avx512f,+fma") is None  # no AVX-512
    assert native.wide_vector_features("x", "+avx2,+avx512fp16") is None  # not the foundation


def test_this_process_compiles_with_the_features_native_chose() -> None:
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        pytest.skip("the environment sets numba's CPU")
    assert native.wide_vector_features(HOST_NAME, HOST_FEATURES) == config.CPU_FEATURES


def _python(program: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    environ.update(env, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, env=environ, cwd=ROOT
    )
    return out.stdout.strip()


@pytest.mark.slow  # subprocesses
def test_a_cpu_the_user_names_wins() -> None:
    program = "import dmlconform.native\nfrom numba.core import config\nprint(config.CPU_FEATURES)"
    assert _python(program, NUMBA_CPU_NAME=HOST_NAME) == "None"
    assert _python(program, NUMBA_CPU_FEATURES="+avx2") == "+avx2"


_REFERENCE_DIGEST = """
import hashlib
import dmlconform as dc
from dmlconform.generation import data
sizes = {"DataType": "FLOAT32", "Sizes": [2, 3, 1, 65536]}  # above MIRROR_MAX_ELEMENTS: compiled
operand = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
desc = dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {
    "InputTensor": sizes, "ScaleTensor": operand, "BiasTensor": operand, "OutputTensor": sizes,
    "Axes": [2, 3], "NormalizeVariance": True, "Epsilon": 1e-5,
    "FusedActivation": {"Type": "ACTIVATION_GELU"},
}})
out = dc.execute(desc, data.make_inputs(desc, "large_offset", seed=3, spec=dc.load_spec()))["OutputTensor"]
print(hashlib.sha256(out.tobytes()).hexdigest())
"""


@pytest.mark.slow  # subprocesses, one compiling the reference kernel
@pytest.mark.skipif(not WIDENED, reason="native leaves this CPU's vector width as it is")
def test_the_reference_gives_the_same_bits_at_either_vector_width(tmp_path: Path) -> None:
    wide = _python(_REFERENCE_DIGEST)
    # the host CPU by name: numba's default features (LLVM's preference for 256-bit vectors),
    # compiled afresh into a cache of its own
    narrow = _python(_REFERENCE_DIGEST, NUMBA_CPU_NAME=HOST_NAME, NUMBA_CACHE_DIR=str(tmp_path))
    assert len(wide) == 64 and wide == narrow
