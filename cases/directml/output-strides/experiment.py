"""Which output strides DirectML accepts: the experiment behind the inferred rule
tensor-output-distinct-strides (spec/common/tensor_desc.yaml).

    python cases/directml/output-strides/experiment.py [--version 1.15.4 ...] [--layouts 8]

For every operator, legal FLOAT32 descs (generator seed 0) get random output strides (each
stride drawn from 0 to 3, 8 or 30, seeded), and every layout the validator calls legal or
refuses only for an output-layout rule is put to DirectML's CreateOperator. The table counts
the answers by what the validator says: legal, broken span (tensor-output-span), or a zero or
repeated stride on a dimension above size 1 (tensor-output-distinct-strides). Refusals by
CompileOperator (finding F12: some LP_NORMALIZATION descs on this stack) are left out: they do
not depend on the output's strides. Exit status 1 when a release and the validator disagree.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter

from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.generation.legal import legal_descs
from dmlconform.releases.acceptance import ACCEPTED, ask
from dmlconform.specification.desc import TensorDesc
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate

SPEC = load_spec()
LAYOUT_RULES = {"tensor-output-span", "tensor-output-distinct-strides"}


def layouts(level: str, per_desc: int) -> list[object]:
    """Descs of every operator with random output strides, the same in every run."""
    rng = random.Random(0)
    out = []
    for name in sorted(SPEC.operators):
        op = SPEC.operator(name)
        for base in legal_descs(name, level, seed=0, count=12, spec=SPEC, dtype="FLOAT32"):
            outputs = [
                k
                for k, v in base.members.items()
                if isinstance(v, TensorDesc) and op.member(k).kind == "output"
            ]
            for _ in range(per_desc):
                member = rng.choice(outputs)
                t = base.members[member]
                top = rng.choice((3, 8, 30))
                strides = tuple(rng.randint(0, top) for _ in t.sizes)
                out.append(base.replace(**{member: t.replace(strides=strides)}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    parser.add_argument("--layouts", type=int, default=8, help="random output layouts per base desc")
    args = parser.parse_args()
    disagreements = 0
    for version in args.version or ["1.15.4"]:
        backend = DirectMLBackend(version=version)
        try:
            level = backend.feature_level
            counts: Counter[tuple[str, str]] = Counter()
            for desc in layouts(level, args.layouts):
                rules = {v.rule for v in validate(desc, level, SPEC)}
                if rules - LAYOUT_RULES:
                    continue  # broken for another reason: not a question about strides
                answer = ask(backend.check, desc)
                if "CompileOperator" in answer.detail:
                    continue
                verdict = "legal" if not rules else "+".join(sorted(rules))
                accepted = answer.verdict == ACCEPTED
                counts[(verdict, "accepted" if accepted else "refused")] += 1
                disagreements += accepted != (not rules)
            print(f"DirectML {version} (level {level})")
            for (verdict, answer), n in sorted(counts.items()):
                print(f"  validator {verdict:<60} DirectML {answer:<9} {n}")
        finally:
            backend.close()
    print(f"{disagreements} disagreements")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
