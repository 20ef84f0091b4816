"""What the degenerate-input check costs on large cases, with its sample and without.

    python bench/bench_degenerate.py [--sizes 20,22] [--repeat 3]

For MEAN_VARIANCE_NORMALIZATION1 over one slice of n (large_offset data), without and with a
fused PARAMETRIC_SOFTPLUS (whose five activations per element make the compiled judge's element
pass its most expensive), and BATCH_NORMALIZATION_TRAINING (4 channels), FLOAT32: the median time
of ``degenerate.why_degenerate`` as it runs (the compiled judge's budgets of a 2^16-element
sample settle it) and with the sample switched off (the pass over every element, as before),
in one process and round-robin, with the reference's own time beside them and the ratio.
"""

from __future__ import annotations

import argparse

from bench_judge import bnt, median_times, mvn1  # the same cases (the script's folder is on the path)

import dmlconform as dc
from dmlconform.generation import data
from dmlconform.tolerance import degenerate

SOFTPLUS = {"Type": "ACTIVATION_PARAMETRIC_SOFTPLUS", "Alpha": 0.25, "Beta": 0.1}
CASES = {"MVN1": mvn1, "MVN1+softplus": lambda n: mvn1(n, SOFTPLUS), "BNT": bnt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,22", help="log2 of n, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    real = degenerate.sampled_budgets
    spec = dc.load_spec()

    def check(desc: dc.OperatorDesc, inputs: dict, ref: dict, sample: bool) -> None:
        degenerate.sampled_budgets = real if sample else (lambda *args, **kwargs: None)
        try:
            assert degenerate.why_degenerate(desc, inputs, ref, spec) is None
        finally:
            degenerate.sampled_budgets = real

    print(f"{'case':16s} {'n':>9s} {'reference':>10s} {'whole':>9s} {'sample':>9s} {'whole/sample':>13s}")
    for log2 in (int(s) for s in a.sizes.split(",")):
        n = 1 << log2
        for name, make in CASES.items():
            desc = make(n)
            inputs = data.make_inputs(desc, "large_offset", seed=1, spec=spec)
            ref = dc.execute(desc, inputs)
            t = median_times(
                {
                    "reference": lambda d=desc, i=inputs: dc.execute(d, i),
                    "whole": lambda d=desc, i=inputs, r=ref: check(d, i, r, False),
                    "sample": lambda d=desc, i=inputs, r=ref: check(d, i, r, True),
                },
                a.repeat,
            )
            print(
                f"{name:16s} {n:>9d} {t['reference'] * 1e3:8.1f}ms {t['whole'] * 1e3:7.1f}ms "
                f"{t['sample'] * 1e3:7.1f}ms {t['whole'] / t['sample']:12.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
