"""How much the numeric cases judge: loose budgets and degenerate references, per output.

    python bench/bench_budgets.py [--cases 32] [--seeds 0 1 2] [--max-elements 70000]
                                  [--operators OP ...] [--json out.json]

Collects the numeric cases of a default-tier run at the latest feature level (the seeded cases
at every level and the size cases up to ``--max-elements``), draws each case's inputs as a run
does (``runner.checks.judged_inputs``; a case the run would skip is counted as skipped), computes the reference and the budgets the comparison uses, and counts per operator and
output member:

- ``loose``: cases whose median budget exceeds half the median |reference| of that output, both
  over the elements where the reference is nonzero: a budget that wide lets an answer with no
  relation to the right one pass (issue 21, item 8); ``all``: the same over every finite
  element, which also counts outputs that are mostly exact zeros (RELU, THRESHOLDED_RELU),
  whose median |reference| is 0 while their zeros are judged to the last bit; ``n=1``: the
  loose cases whose reduction slices hold one value each (the budgets then still grant the
  mean of one element a rounding error, divided by sqrt(Epsilon));
- ``zero``: cases whose reference for that output is identically zero;
- ``nonfinite``: cases whose reference for that output has no finite element;

and per operator the numeric cases (every output together) that three answers with nothing to
do with the operator pass: all zeros, the right answer negated, an input returned unchanged
(``dmlconform.tolerance.degenerate.impostors``; as backends: ``broken.Zeros``, ``Negated``,
``InputUnchanged``). A case that one of them passes judges nothing. Not a speed benchmark: a
before/after measure of how discriminating the generated cases are.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

import numpy as np

from dmlconform import execute, kernels, tolerance
from dmlconform.generation.data import effective_reduction_size
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import judged_inputs
from dmlconform.specification.spec import load_spec
from dmlconform.tolerance.degenerate import impostors
from dmlconform.tolerance.options import NO_OPTIONS


def _budgets(spec: Any, desc: Any, ref: dict[str, np.ndarray], inputs: dict[str, np.ndarray]) -> dict:
    fn = kernels.part(desc, spec, "budgets")
    return fn(desc, ref, inputs, spec).by_member


def measure(cases: int, seeds: list[int], max_elements: int, operators: tuple[str, ...]) -> dict:
    spec = load_spec()
    level = spec.levels[-1]
    per_output: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    per_op: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: dict[str, list[str]] = defaultdict(list)
    for seed in seeds:
        sel = Selection(
            level=level,
            operators=operators,
            cases=cases,
            seed=seed,
            kinds=("numeric",),
            max_elements=max_elements,
        )
        for case in collect(spec, sel):
            try:
                judged = judged_inputs(case, spec)  # as the runner draws them
                inputs, ref = judged.inputs, judged.reference
            except Exception as exc:  # the run skips the case too
                per_op[case.operator]["skipped"] += 1
                examples[f"{case.operator} skipped"].append(f"{case.id} seed {seed}: {exc}")
                continue
            ref = ref if ref is not None else execute(case.desc, inputs)
            with np.errstate(all="ignore"):
                budgets = _budgets(spec, case.desc, ref, inputs)
            op = per_op[case.operator]
            op["cases"] += 1
            degenerate = True
            for name, b in budgets.items():
                r = np.asarray(ref[name], dtype=np.float64)
                row = per_output[f"{case.operator}.{name}"]
                row["cases"] += 1
                finite = np.isfinite(r)
                key = f"{case.operator}.{name}"
                if not finite.any():
                    row["nonfinite"] += 1
                    examples[f"{key} nonfinite"].append(f"{case.id} seed {seed} {case.regime}")
                    continue
                if not np.any(r[finite]):
                    row["zero"] += 1
                    examples[f"{key} zero"].append(f"{case.id} seed {seed} {case.regime}")
                    continue
                degenerate = False
                b = np.broadcast_to(b, r.shape)
                nonzero = finite & (r != 0)
                med_b, med_r = float(np.median(b[nonzero])), float(np.median(np.abs(r[nonzero])))
                if not med_b <= 0.5 * med_r:
                    row["loose"] += 1
                    row["loose_n1"] += effective_reduction_size(case.desc, spec) == 1
                    examples[f"{key} loose"].append(
                        f"{case.id} seed {seed} {case.regime}: median budget {med_b:.3g}, median |ref| {med_r:.3g}"
                        " (nonzero elements)"
                    )
                if not float(np.median(b[finite])) <= 0.5 * float(np.median(np.abs(r[finite]))):
                    row["loose_all"] += 1
            op["degenerate"] += degenerate
            for label, answer in impostors(case.desc, ref, inputs, spec).items():
                with np.errstate(all="ignore"):
                    verdict = tolerance.compare(case.desc, answer, ref, inputs, spec, NO_OPTIONS)
                if verdict.passed:
                    op[f"{label} passes"] += 1
                    examples[f"{case.operator} {label} passes"].append(f"{case.id} seed {seed} {case.regime}")
    return {"per_output": per_output, "per_operator": per_op, "examples": examples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=32)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-elements", type=int, default=70_000, help="skip size cases above this")
    ap.add_argument("--operators", nargs="*", default=[])
    ap.add_argument("--json", help="write the counts and the cases behind them here")
    ap.add_argument("--examples", type=int, default=3, help="cases listed per finding")
    a = ap.parse_args()
    res = measure(a.cases, a.seeds, a.max_elements, tuple(a.operators))
    print(f"--cases {a.cases}, seeds {a.seeds}, size cases up to {a.max_elements} elements")
    print(
        f"{'operator.output':<60} {'cases':>6} {'loose':>13} {'n=1':>4} {'all':>13} {'zero':>5} {'nonfinite':>9}"
    )
    for key in sorted(res["per_output"]):
        r = res["per_output"][key]
        share = f"{r['loose']} ({r['loose'] / r['cases']:.1%})"
        share_all = f"{r['loose_all']} ({r['loose_all'] / r['cases']:.1%})"
        print(
            f"{key:<60} {r['cases']:>6} {share:>13} {r['loose_n1']:>4} {share_all:>13} {r['zero']:>5} "
            f"{r['nonfinite']:>9}"
        )
    print(
        f"\n{'operator':<36} {'cases':>6} {'degenerate':>10} {'skipped':>7} {'zeros':>6} {'negated':>7} {'input':>6}"
    )
    for key in sorted(res["per_operator"]):
        r = res["per_operator"][key]
        print(
            f"{key:<36} {r['cases']:>6} {r['degenerate']:>10} {r['skipped']:>7} {r['zeros passes']:>6} "
            f"{r['negated passes']:>7} {r['input passes']:>6}"
        )
    if a.examples:
        print()
        for key in sorted(res["examples"]):
            found = res["examples"][key]
            print(f"{key}: {len(found)}")
            for line in found[: a.examples]:
                print(f"    {line}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
