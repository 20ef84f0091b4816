"""The kernel registry (dmlconform/kernels/) is whole: every kernel the spec names has every
part, every part imports, operators agree with their kernel's model and relations, and every
backend that lowers kernels lowers only registered ones (the numpy backend all of them)."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import REPO, SPEC

import dmlconform as dc
from dmlconform import kernels
from dmlconform.backends import numpy_backend


def test_the_registry_serves_every_operator_of_the_spec():
    assert kernels.problems(SPEC) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda k: dataclasses.replace(k, budgets="dmlconform.tolerance.normalization:no_such"),
            "does not resolve",
        ),
        (lambda k: dataclasses.replace(k, judge="dmlconform.no_such_module:plan_for"), "does not resolve"),
        (lambda k: dataclasses.replace(k, model="pointwise"), "tolerance.model"),
        (lambda k: dataclasses.replace(k, relations=()), "is not served"),
        (lambda k: dataclasses.replace(k, variants=("no_such_kernel",)), "not registered"),
    ],
)
def test_a_kernel_lacking_a_part_is_reported(mutate, expected):
    registry = dict(kernels.KERNELS)
    registry["normalization"] = mutate(registry["normalization"])
    assert any(expected in p for p in kernels.problems(SPEC, registry))


def test_an_operator_naming_an_unregistered_kernel_is_reported():
    registry = {k: v for k, v in kernels.KERNELS.items() if k != "given_statistics"}
    assert any("BATCH_NORMALIZATION" in p and "not registered" in p for p in kernels.problems(SPEC, registry))


def test_every_operator_resolves_to_a_kernel_whose_reference_runs():
    """Through the registry alone: a legal desc of every operator runs on the reference."""
    from dmlconform.generation.legal import legal_descs

    for op in SPEC.operators:
        desc = next(iter(legal_descs(op, SPEC.levels[-1], seed=3, count=1, spec=SPEC)))
        kernel = kernels.kernel_of(desc, SPEC)
        assert kernel.name in kernels.KERNELS
        plan = kernels.plan(desc, SPEC)
        assert type(plan).kernel == kernel.name  # each kernel's builder gives its own plan type
        assert set(plan.inputs) <= set(desc.members) and set(plan.outputs) <= set(desc.members)
        outputs = kernels.execute(desc, dc_inputs(desc), SPEC)
        assert set(outputs) == set(plan.outputs)


def test_the_uncentred_variant_is_picked_by_the_center_flag():
    t = {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4]}
    base = {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "UseVariance": True, "Epsilon": 1e-5}
    centred = dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION2", "desc": {**base, "UseMean": True}})
    uncentred = dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION2", "desc": {**base, "UseMean": False}})
    assert kernels.kernel_name(centred, SPEC) == "normalization"
    assert kernels.kernel_name(uncentred, SPEC) == "rms_normalization"


def dc_inputs(desc):
    from dmlconform.generation.data import make_inputs

    return make_inputs(desc, "standard_normal", seed=1, spec=SPEC)


def test_backends_lower_registered_kernels_and_numpy_lowers_all():
    assert set(numpy_backend.LOWERINGS) == set(kernels.KERNELS)
    for module in ("onnxruntime_backend", "torch_backend"):
        mod = pytest.importorskip(f"dmlconform.backends.{module}")
        assert set(mod.LOWERINGS) <= set(kernels.KERNELS), module


def test_a_spec_naming_an_unknown_kernel_is_refused_by_its_schema(tmp_path):
    """The schema leaves the list of kernels to the loader, which fills it from the kernel
    modules: a kernel no module declares is refused where the spec loads, in one line naming
    the file, the line and every kernel."""
    import re

    from dmlconform.specification.spec import SpecError

    spec_dir = REPO / "spec"
    rel = "operators/lp_normalization.yaml"
    text = (spec_dir / rel).read_text(encoding="utf-8")
    found = re.search(r"^  kernel: (\w+)$", text, re.MULTILINE)
    assert found is not None
    line = text[: found.start()].count("\n") + 1
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(
        text[: found.start(1)] + "no_such_kernel" + text[found.end(1) :], encoding="utf-8"
    )
    (tmp_path / "spec-overlay.yaml").write_text(f"base: {spec_dir}\nreplace: [{rel}]\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        dc.load_spec(tmp_path)
    message = err.value.one_line()
    assert "\n" not in message and f"{rel}:{line}:" in message
    assert f"kernel: 'no_such_kernel' is not one of {sorted(kernels.KERNELS)}" in message
