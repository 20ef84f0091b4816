"""``dmlconform execute DESC [--inputs in.npz] [-o out.npz]``: run the reference executor.

Inputs come from an .npz whose member names are the desc's input tensor members; without
``--inputs`` they are standard-normal with a fixed seed (``--seed``), so a desc alone is enough to
look at the reference's behaviour. A desc that no feature level admits is refused with the rules it
breaks (``dmlconform validate`` says more); a desc the reference cannot run, an inputs file that is
not an .npz, or a missing or misshapen input, is one line naming the member and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dmlconform.cli import add_spec_dir


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "execute",
        help="run the float64 reference executor on a desc",
        description="Run the float64 reference executor on DESC and save or summarize its outputs. A "
        "desc no feature level admits is refused with the rules it breaks. Exit status: 0 ran, 2 "
        "unusable desc or inputs (one line naming the file and member).",
    )
    p.add_argument("desc", metavar="DESC", help="desc file (YAML or JSON)")
    p.add_argument("--inputs", metavar="NPZ", help="input arrays by member name (default: standard normal)")
    p.add_argument("-o", "--out", metavar="NPZ", help="write the outputs here (default: print a summary)")
    # the name before every verb's output was -o/--out: still taken, not shown
    p.add_argument("--output", dest="out", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed of the generated inputs (default 0)"
    )
    add_spec_dir(p)
    p.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"dmlconform execute: error: {message}", file=sys.stderr)
    return 2


def _generate(desc: Any, spec: Any, seed: int) -> dict[str, np.ndarray]:
    """Standard normal inputs (the data generator's: a given variance is never negative)."""
    from dmlconform.generation.data import make_inputs

    return dict(make_inputs(desc, "standard_normal", seed, spec=spec))


def _illegal_everywhere(desc: Any, spec: Any, path: str) -> str | None:
    """Why the reference will not run ``desc`` (None: it is legal at some feature level).

    The reference computes what the docs define, and they define nothing for a desc no level
    admits: such a desc is refused with the rules it breaks at the newest level, before any
    buffer is allocated (a broken size rule can ask for petabytes)."""
    from dmlconform.specification.validate import validate

    levels = spec.levels_from(spec.operator(desc.operator))
    if any(not validate(desc, lv, spec) for lv in levels):
        return None
    top = levels[-1] if levels else spec.levels[-1]
    found = validate(desc, top, spec)
    rules = ", ".join(dict.fromkeys(v.rule for v in found))
    return f"illegal at every feature level, not run ({rules}); at {top.name}: {found[0]}" + (
        f" (and {len(found) - 1} more: dmlconform validate {path} -l {top.name})" if len(found) > 1 else ""
    )


def _is_npz(path: Path) -> bool:
    """An .npz is a zip archive; anything else (a YAML desc, a .npy) is refused by name rather
    than with numpy's message about pickled data."""
    import zipfile

    return not path.is_file() or zipfile.is_zipfile(path)


def run(args: argparse.Namespace) -> int:
    from dmlconform.kernels import PlanError, UnknownKernel, execute, plan
    from dmlconform.reference import InputError
    from dmlconform.specification.desc import DescError, load_desc
    from dmlconform.specification.spec import SpecError, load_spec

    try:
        spec = load_spec(args.spec_dir)
        desc = load_desc(args.desc, spec)
        illegal = _illegal_everywhere(desc, spec, args.desc)
        if illegal:
            return _fail(f"{args.desc}: {illegal}")
        names = plan(desc, spec).inputs
    except (DescError, SpecError, UnknownKernel) as exc:
        return _fail(str(exc))
    except PlanError as exc:
        return _fail(f"{args.desc}: {exc}")
    if args.inputs:
        inputs = _read_inputs(args.inputs, names)
        if isinstance(inputs, str):
            return _fail(inputs)
    try:
        if not args.inputs:  # a legal desc may hold 2^32 - 1 elements: its inputs alone can exceed the memory
            inputs = _generate(desc, spec, args.seed)
        outputs = execute(desc, inputs, spec)
    except MemoryError as exc:
        return _fail(f"{args.desc}: not enough memory to run the reference on this desc ({exc})")
    except InputError as exc:
        return _fail(f"{args.inputs or 'inputs'}: {exc}")
    except PlanError as exc:
        return _fail(f"{args.desc}: {exc}")
    if args.out:
        try:
            np.savez(Path(args.out), **{k: np.ascontiguousarray(v) for k, v in outputs.items()})
        except OSError as exc:
            return _fail(f"{args.out}: cannot write: {exc.strerror or exc}")
        print(f"wrote {', '.join(outputs)} to {args.out}")
        return 0
    _print_summary(outputs)
    return 0


def _read_inputs(path: str, names: tuple[str, ...]) -> dict[str, np.ndarray] | str:
    """The arrays of the --inputs file, or why they cannot be the desc's inputs (one line)."""
    if not _is_npz(Path(path)):
        return (
            f"{path}: not an .npz file (--inputs takes numpy's .npz of arrays named by "
            "input member, as 'dmlconform generate --with-data' writes)"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            inputs = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        return f"{path}: cannot read inputs: {exc}"
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        return f"{path}: {unknown[0]}: not an input member of this desc (inputs: {', '.join(names)})"
    return inputs


def _print_summary(outputs: dict[str, np.ndarray]) -> None:
    """Each output's shape, dtype and the range and mean of its finite values."""
    for name, value in outputs.items():
        v = value.astype(np.float64)
        finite = v[np.isfinite(v)]
        stats = (
            f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}"
            if finite.size
            else "no finite values"
        )
        print(f"{name}: shape {list(value.shape)} {value.dtype}  {stats}")
