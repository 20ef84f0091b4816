"""numba, set up for this machine's vectors. Every compiled module imports numba from here.

Why: LLVM's x86 tuning prefers 256-bit vectors on Intel CPUs with AVX-512
(``prefer-256-bit``), so the vectorized loops of the reference and the judge ran half as wide as
the machine allows. Compiled without that preference, the judge of MVN1 over one slice of 2^22
FLOAT32 elements took 19.4 ms instead of 23.4 ms on this project's Emerald Rapids machine
(``bench/bench_judge.py`` prints it).

It is left alone where it is the right call: on the first AVX-512 parts (Skylake-SP, Cascade
Lake, Cooper Lake, Cannon Lake), 512-bit code lowers the clock of the whole core. A
``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` the user set wins. The setting is numba's own, so
it holds for every function compiled in the process after this import, the user's too; numba
fixes its target once, so a process that compiled before it keeps the default.

No result changes with the vector width: every float sum's order is written in the source (the
kernels' lanes), not chosen by the vectorizer, and the integer maxima are exact. numba keys its
on-disk cache by the features, so a change of setting recompiles instead of loading code built
for other features.
"""

from __future__ import annotations

from numba import njit, types, vectorize
from numba.core import codegen, config

#: AVX-512 CPUs whose 512-bit instructions slow the core down (LLVM's names)
DOWNCLOCKING = frozenset({"skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "knl", "knm"})


def wide_vector_features(cpu_name: str, features: str) -> str | None:
    """The feature string that lets LLVM use 512-bit vectors, or None where it should not."""
    if "+avx512f" not in features.split(",") or cpu_name in DOWNCLOCKING:
        return None
    return features + ",-prefer-256-bit"


def _configure() -> None:
    """Before the first compilation (numba builds its target machine once, from ``config``)."""
    if config.CPU_NAME is not None or config.CPU_FEATURES is not None:
        return
    import llvmlite.binding as llvm

    wide = wide_vector_features(llvm.get_host_cpu_name(), codegen.get_host_cpu_features())
    if wide is not None:
        config.CPU_FEATURES = wide


_configure()

__all__ = ["njit", "types", "vectorize", "wide_vector_features"]
