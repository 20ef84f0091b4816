"""The backend author's API is the one the built-in backends use: ``dmlconform`` (``plan``, the
plan types, the exceptions) and ``dmlconform.backends`` (``BackendBase``, ``Option``); the spec's
``semantics`` mapping is read by the kernels' plan builders and nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from helpers import SPEC

import dmlconform as dc
from dmlconform import kernels

PACKAGE = Path(__file__).resolve().parent.parent / "dmlconform"
#: what a built-in backend may import from the package: the documented API (docs/backends.md);
#: the numpy backend is documented as a base whose steps a variant overrides (gpu-style)
PUBLIC = {"dmlconform", "dmlconform.backends", "dmlconform.backends.numpy_backend"}
#: modules of the backends package that are not backends of their own: the protocol and loader,
#: the mutation kit of deliberately broken backends, and the numpy backend's compiled erf
NOT_BUILTIN_BACKENDS = {"base", "broken", "__init__"}
#: where the raw ``semantics`` mapping may be read: the kernels (plan builders), the spec loader
#: that holds it, and the spec's own lint
SEMANTICS_READERS = (
    "dmlconform/kernels/",
    "dmlconform/specification/spec.py",
    "dmlconform/specification/lint.py",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_imports(path: Path) -> set[str]:
    """Every ``dmlconform`` module a file imports, at any depth (function bodies included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "dmlconform" or m.startswith("dmlconform.")}


def _builtin_backend_files() -> list[Path]:
    own_helpers = {"compiled_erf"}  # the numpy backend's compiled erf: part of that backend
    return [
        p
        for p in sorted((PACKAGE / "backends").glob("*.py"))
        if p.stem not in NOT_BUILTIN_BACKENDS | own_helpers
    ]


def test_the_built_in_backends_import_nothing_outside_the_public_api():
    outside = {
        f"{_module_name(p)} imports {m}"
        for p in _builtin_backend_files()
        for m in _package_imports(p)
        if m not in PUBLIC and not m.startswith(_module_name(p)) and m != "dmlconform.backends.compiled_erf"
    }
    assert not outside, sorted(outside)


def test_every_registered_built_in_backend_is_checked_above():
    """The list above covers every built-in backend the entry points register outside the
    DirectML runner's subpackage (which packs descs by the spec's member tables, not plans)."""
    from dmlconform.backends import BUILTIN_BACKENDS

    checked = {_module_name(p) for p in _builtin_backend_files()}
    for name, target in BUILTIN_BACKENDS.items():
        module = target.partition(":")[0]
        assert module in checked or module.startswith("dmlconform.backends.directml."), name


def test_no_code_outside_the_plan_builders_reads_the_raw_semantics_mapping():
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith(SEMANTICS_READERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            attribute = isinstance(node, ast.Attribute) and node.attr == "semantics"
            if attribute or (isinstance(node, ast.Constant) and node.value == "semantics"):
                readers.append(f"{rel}:{node.lineno}")
    assert not readers, readers


def _desc(operator: str, **members):
    return dc.parse_desc({"type": operator, "desc": members})


T = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]}


@pytest.mark.parametrize(
    ("desc", "plan_type", "fields"),
    [
        (
            _desc(
                "MEAN_VARIANCE_NORMALIZATION1",
                InputTensor=T,
                OutputTensor=T,
                Axes=[2, 3],
                NormalizeVariance=True,
                Epsilon=0.1,
            ),
            dc.NormalizationPlan,
            {"axes": (2, 3), "epsilon": float(np.float32(0.1)), "centre": "mean", "scale": None},
        ),
        (
            _desc(
                "MEAN_VARIANCE_NORMALIZATION2",
                InputTensor=T,
                OutputTensor=T,
                Axes=[3, 1],
                UseMean=False,
                UseVariance=True,
            ),
            dc.RmsNormalizationPlan,
            {"axes": (1, 3), "centre": None, "epsilon": float(np.float32(1e-5))},
        ),
        (
            _desc(
                "LOCAL_RESPONSE_NORMALIZATION",
                InputTensor=T,
                OutputTensor=T,
                CrossChannel=True,
                LocalSize=4,
                Alpha=0.3,
                Beta=0.75,
                Bias=0.5,
            ),
            dc.LocalResponsePlan,
            {"axes": (1,), "below": 1, "above": 2, "divisor": 4.0, "alpha": float(np.float32(0.3))},
        ),
        (
            _desc(
                "LOCAL_RESPONSE_NORMALIZATION",
                InputTensor=T,
                OutputTensor=T,
                CrossChannel=False,
                LocalSize=3,
                Alpha=1.0,
                Beta=0.5,
                Bias=1.0,
            ),
            dc.LocalResponsePlan,
            {"axes": (2, 3), "below": 1, "above": 1, "divisor": 3.0},
        ),
        (
            _desc("LP_NORMALIZATION", InputTensor=T, OutputTensor=T, Axis=2, Epsilon=0.0, P=1),
            dc.LpNormalizationPlan,
            {"axes": (2,), "p": 1, "epsilon": 0.0, "epsilon_placement": "squared_norm"},
        ),
    ],
)
def test_a_plan_reads_the_desc_in_directmls_terms(desc, plan_type, fields):
    plan = dc.plan(desc)
    assert type(plan) is plan_type
    assert plan.kernel == kernels.kernel_name(desc, SPEC)
    for name, value in fields.items():
        assert getattr(plan, name) == value, name
    assert plan.inputs[0] == "InputTensor" and plan.outputs == ("OutputTensor",)


def test_a_plan_names_the_optional_members_present_and_the_outputs_asked_for():
    c = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    act = {"Type": "ACTIVATION_ELU"}
    bnt = _desc(
        "BATCH_NORMALIZATION_TRAINING",
        InputTensor=T,
        ScaleTensor=c,
        BiasTensor=c,
        OutputTensor=T,
        OutputMeanTensor=c,
        OutputVarianceTensor=c,
        Epsilon=1e-3,
        FusedActivation=act,
    )
    plan = dc.plan(bnt)
    assert plan.axes == (0, 2, 3) and plan.fits_batch_norm() and not plan.fits_instance_norm()
    assert plan.inputs == ("InputTensor", "ScaleTensor", "BiasTensor")
    assert plan.outputs == ("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor")
    assert plan.activation == "ACTIVATION_ELU" and plan.activation_params == {"Alpha": 1.0}  # default filled
    finished = plan.finish(
        {m: np.zeros(3) for m in plan.outputs[1:]} | {"OutputTensor": np.zeros((2, 3, 4, 5))}
    )
    assert (
        finished["OutputMeanTensor"].shape == (1, 3, 1, 1)
        and finished["OutputMeanTensor"].dtype == np.float32
    )


def test_a_gradient_plan_says_what_it_centres_on():
    c = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    members = {
        "InputTensor": T,
        "InputGradientTensor": T,
        "MeanTensor": c,
        "VarianceTensor": c,
        "ScaleTensor": c,
        "OutputGradientTensor": T,
        "OutputScaleGradientTensor": c,
        "OutputBiasGradientTensor": c,
        "Epsilon": 1e-3,
    }
    given = dc.plan(_desc("BATCH_NORMALIZATION_GRAD", **members))
    batch = dc.plan(_desc("BATCH_NORMALIZATION_TRAINING_GRAD", **members))
    assert type(given) is dc.NormalizationGradPlan and given.statistics == "given"
    assert given.centre == "MeanTensor" and given.axes == (0, 2, 3)
    assert batch.statistics == "batch" and batch.centre == "MeanTensor"  # spec: centre_with mean
    assert set(batch.outputs) == {
        "OutputGradientTensor",
        "OutputScaleGradientTensor",
        "OutputBiasGradientTensor",
    }


def test_a_desc_missing_a_member_is_one_plan_error():
    with pytest.raises(dc.PlanError, match="OutputTensor"):
        dc.plan(_desc("LP_NORMALIZATION", InputTensor=T, Axis=2, P=2))


def test_the_structure_key_ignores_sizes_only():
    def mvn1(t, **more):
        return _desc("MEAN_VARIANCE_NORMALIZATION1", InputTensor=t, OutputTensor=t, Axes=[2, 3], **more)

    a = mvn1(T, NormalizeVariance=True)
    b = mvn1({"DataType": "FLOAT32", "Sizes": [4, 6, 8, 10]}, NormalizeVariance=True)
    c = mvn1(T, NormalizeVariance=True, Epsilon=0.5)
    assert dc.plan(a).structure_key() == dc.plan(b).structure_key() != dc.plan(c).structure_key()


def test_every_third_party_package_a_built_in_backend_imports_has_an_extra():
    """The loader's "pip install dmlconform[EXTRA]" line comes from pyproject.toml's extras: a
    built-in backend whose library no extra installs would leave a user with no line to run."""
    import sys

    from dmlconform.distribution import extra_for_package

    stdlib = set(sys.stdlib_module_names) | {"numpy", "dmlconform", "numba"}
    missing = []
    for p in _builtin_backend_files():
        for node in ast.parse(p.read_text()).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top and top not in stdlib and extra_for_package(top) is None:
                    missing.append(f"{p.name}: {top}")
    assert not missing, missing
