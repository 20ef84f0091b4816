"""The bundled spec: schema-valid, every rule cited, quotes verbatim from the seed docs, levels and
activations as directml-facts.md lists them, doc disagreements recorded, loader errors located."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SPEC

from dmlconform.specification.rules import KINDS
from dmlconform.specification.spec import (
    SCHEMA_FOR,
    SpecError,
    UnknownLevel,
    load_spec,
    read_spec_files,
    schema_errors,
)

REPO = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO / "spec"


def _seeds_dir() -> Path | None:
    env = os.environ.get("DMLCONFORM_SEEDS_DIR")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "seeds"]:
        if cand.is_dir():
            return cand
    return None


SEEDS = _seeds_dir()
FACTS = SEEDS.parent / "design" / "directml-facts.md" if SEEDS else None
needs_seeds = pytest.mark.skipif(SEEDS is None, reason="seed documents (../shared/seeds) not at hand")

RAW = {rel: data for rel, (data, _node) in read_spec_files(SPEC_DIR).items()}
OPERATOR_FILES = {rel: data for rel, data in RAW.items() if rel.startswith("operators")}


def _all_rules() -> list[tuple[str, Any]]:
    out = [(op.name, r) for op in SPEC.operators.values() for r in op.rules]
    out += [("(tensor)", r) for r in SPEC.tensor_rules]
    out += [("(activation)", r) for r in SPEC.activation_rules]
    return out


def _sources(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every ``source`` mapping in a spec file (rules, members, support rows, semantics)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "source" and isinstance(v, dict):
                yield f"{path}.source", v
            else:
                yield from _sources(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _sources(v, f"{path}[{i}]")


def _normalise(text: str) -> str:
    text = re.sub(r"[*`]", "", text)
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------
# Loading and schemas


def test_bundled_spec_loads() -> None:
    assert set(SPEC.operators) == {
        "MEAN_VARIANCE_NORMALIZATION",
        "MEAN_VARIANCE_NORMALIZATION1",
        "MEAN_VARIANCE_NORMALIZATION2",
        "BATCH_NORMALIZATION",
        "BATCH_NORMALIZATION_GRAD",
        "BATCH_NORMALIZATION_TRAINING",
        "BATCH_NORMALIZATION_TRAINING_GRAD",
        "LOCAL_RESPONSE_NORMALIZATION",
        "LOCAL_RESPONSE_NORMALIZATION_GRAD",
        "LP_NORMALIZATION",
    }
    assert SPEC.operator("DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1").introduced == "2_1"
    assert SPEC.operator("LOCAL_RESPONSE_NORMALIZATION_GRAD").introduced == "3_1"
    assert SPEC.operator("BATCH_NORMALIZATION_TRAINING").introduced == "4_1"
    assert SPEC.operator("MEAN_VARIANCE_NORMALIZATION").introduced == "1_0"


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("MVN1", "MEAN_VARIANCE_NORMALIZATION1"),
        ("mvn", "MEAN_VARIANCE_NORMALIZATION"),
        ("bntg", "BATCH_NORMALIZATION_TRAINING_GRAD"),
        ("BNG", "BATCH_NORMALIZATION_GRAD"),
        ("LRNG", "LOCAL_RESPONSE_NORMALIZATION_GRAD"),
        ("lp", "LP_NORMALIZATION"),
        ("lp_normalization", "LP_NORMALIZATION"),
        (" DML_OPERATOR_BATCH_NORMALIZATION ", "BATCH_NORMALIZATION"),
    ],
)
def test_operators_are_found_by_any_name_a_user_types(typed: str, name: str) -> None:
    assert SPEC.operator(typed).name == name


def test_every_operator_has_a_distinct_short_name() -> None:
    shorts = [op.short_name for op in SPEC.operators.values()]
    assert all(shorts) and len(set(shorts)) == len(shorts)
    assert not set(shorts) & set(SPEC.operators)


def test_an_unknown_operator_lists_the_names_and_short_names() -> None:
    with pytest.raises(KeyError) as info:
        SPEC.operator("MVN3")
    message = info.value.args[0]
    assert message.startswith("unknown operator 'MVN3' (known: ")
    assert "MEAN_VARIANCE_NORMALIZATION1 (MVN1)" in message and "LP_NORMALIZATION (LP)" in message
    assert str(info.value) == message  # not quoted, as str() of a plain KeyError would be


def test_spec_rules_names_an_unknown_operator_in_one_unquoted_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmlconform.cli import main

    assert main(["spec", "rules", "MVN3"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("dmlconform spec rules: error: unknown operator 'MVN3' (known: ")
        and err.count("\n") == 1
    )


@pytest.mark.parametrize("rel", sorted(RAW))
def test_every_file_passes_its_schema(rel: str) -> None:
    data, node = read_spec_files(SPEC_DIR)[rel]
    assert schema_errors(SPEC_DIR, rel, data, node) == []


def test_every_file_has_a_schema() -> None:
    assert set(SCHEMA_FOR) <= set(RAW)
    for name in set(SCHEMA_FOR.values()) | {"operator.schema.json"}:
        assert (SPEC_DIR / "schema" / name).is_file()


# --------------------------------------------------------------------------------------------
# Rules


@pytest.mark.parametrize(("owner", "rule"), _all_rules(), ids=lambda x: getattr(x, "id", x))
def test_rule_is_cited_and_known(owner: str, rule: Any) -> None:
    assert rule.source, f"{owner} {rule.id} has no source"
    assert rule.source.get("page") or rule.source.get("doc")
    assert rule.source_text()
    assert rule.kind in KINDS, (
        f"{owner} {rule.id}: kind {rule.kind} not in dmlconform.specification.rules.KINDS"
    )
    for param in KINDS[rule.kind].params:
        assert param in rule.params, f"{owner} {rule.id}: kind {rule.kind} needs {param}"
    if rule.inferred:
        assert rule.why and rule.why.strip(), f"{owner} {rule.id} is inferred but says not why"
    for lv in (rule.since, rule.until):
        if lv is not None:
            SPEC.level(lv)


def test_rule_ids_unique_per_operator() -> None:
    for op in SPEC.operators.values():
        ids = [r.id for r in SPEC.rules_for(op)]
        assert len(ids) == len(set(ids)), (
            f"{op.name}: duplicate ids {sorted(i for i in ids if ids.count(i) > 1)}"
        )


def test_rules_name_existing_members() -> None:
    for op in SPEC.operators.values():
        for r in op.rules:
            for m in KINDS[r.kind].members(r):
                assert op.member(m) is not None, f"{op.name} {r.id} names unknown member {m}"


def test_rules_and_members_cite_the_operators_own_seeds() -> None:
    for rel, data in OPERATOR_FILES.items():
        seeds = {s["seed"] for s in data["seeds"]}
        own = {k: data.get(k) for k in ("members", "support", "rules")}
        for where, src in _sources(own):
            if "seed" in src:
                assert src["seed"] in seeds, f"{rel}{where}: seed {src['seed']} not in the file's seeds"


@needs_seeds
def test_cited_seed_files_exist() -> None:
    assert SEEDS is not None
    for rel, data in RAW.items():
        for where, src in _sources(data):
            if "seed" in src:
                assert (SEEDS / src["seed"]).is_file(), f"{rel}{where}: {src['seed']} not found"


def _quotes() -> list[Any]:
    out = []
    for rel, data in RAW.items():
        for where, src in _sources(data):
            if "quote" in src:
                out.append(pytest.param(rel, where, src, id=f"{rel}{where}"))
    return out


@needs_seeds
@pytest.mark.parametrize(("rel", "where", "src"), _quotes())
def test_quote_is_verbatim_in_the_cited_document(rel: str, where: str, src: dict[str, Any]) -> None:
    assert SEEDS is not None and FACTS is not None
    if "seed" in src:
        doc = SEEDS / src["seed"]
    elif src.get("quoted_in") in ("more-operators.md", "family-facts.md"):
        doc = FACTS.parent / src["quoted_in"]  # the facts sheet that quotes the doc page
    else:
        assert src.get("doc") == "directml-facts.md", (
            f"{rel}{where}: a quote must cite a seed, the facts page or more-operators.md (quoted_in)"
        )
        doc = FACTS
    text = _normalise(doc.read_text(encoding="utf-8"))
    assert _normalise(src["quote"]) in text, f"{rel}{where}: quote not found in {doc.name}: {src['quote']!r}"


def test_there_are_quotes_to_check() -> None:
    assert len(_quotes()) >= 15


# --------------------------------------------------------------------------------------------
# Feature levels, data types, activations (directml-facts.md)

FACT_LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]  # fmt: skip


def test_feature_levels_in_order() -> None:
    assert [lv.name for lv in SPEC.levels] == FACT_LEVELS
    assert [lv.index for lv in SPEC.levels] == list(range(len(FACT_LEVELS)))
    values = [lv.value for lv in SPEC.levels]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert SPEC.level("3_0").value == 0x3000 and SPEC.level("6_4").value == 0x6400
    assert {lv.name: lv.max_dimension_count for lv in SPEC.levels if lv.index < 3} == {
        "1_0": 5,
        "2_0": 5,
        "2_1": 5,
    }
    assert all(lv.max_dimension_count == 8 for lv in SPEC.levels if lv.index >= 3)


@pytest.mark.parametrize("spelling", ["5_2", "5.2", "DML_FEATURE_LEVEL_5_2"])
def test_level_spellings(spelling: str) -> None:
    assert SPEC.level(spelling).name == "5_2"


def test_unknown_level() -> None:
    with pytest.raises(UnknownLevel):
        SPEC.level("5_3")


FACT_ACTIVATIONS = {
    "IDENTITY": "1_0",
    "LINEAR": "1_0",
    "SIGMOID": "1_0",
    "HARD_SIGMOID": "1_0",
    "TANH": "1_0",
    "SCALED_TANH": "1_0",
    "RELU": "1_0",
    "LEAKY_RELU": "1_0",
    "THRESHOLDED_RELU": "1_0",
    "ELU": "1_0",
    "SCALED_ELU": "1_0",
    "SOFTPLUS": "1_0",
    "PARAMETRIC_SOFTPLUS": "1_0",
    "SOFTSIGN": "1_0",
    "SHRINK": "2_0",
    "CELU": "3_0",
    "GELU": "5_1",
}


def test_seventeen_fusable_activations() -> None:
    assert len(SPEC.activations) == 17
    assert {
        name.removeprefix("ACTIVATION_"): a.since for name, a in SPEC.activations.items()
    } == FACT_ACTIVATIONS


def test_activation_parameters_and_typical_values() -> None:
    params = {
        n.removeprefix("ACTIVATION_"): {p.name: p.default for p in a.parameters}
        for n, a in SPEC.activations.items()
    }
    assert params["LINEAR"] == {"Alpha": None, "Beta": None}
    assert params["HARD_SIGMOID"] == {"Alpha": 0.2, "Beta": 0.5}
    assert params["SCALED_TANH"] == {"Alpha": 1.0, "Beta": 0.5}
    assert params["LEAKY_RELU"] == {"Alpha": 0.01}
    assert params["SCALED_ELU"] == {
        "Alpha": 1.67326319217681884765625,
        "Gamma": 1.05070102214813232421875,
    }  # DirectMLX.h
    assert params["SOFTPLUS"] == {"Steepness": 1.0}
    assert params["SHRINK"] == {"Bias": 0.0, "Threshold": 0.5}
    assert params["CELU"] == {"Alpha": 1.0}
    for name in ("IDENTITY", "SIGMOID", "TANH", "RELU", "SOFTSIGN", "GELU"):
        assert params[name] == {}


def test_softplus_steepness_rule_until_6_4() -> None:
    (rule,) = [r for r in SPEC.activation_rules if r.kind == "activation_parameter_min"]
    assert rule.params["activation"] == "ACTIVATION_SOFTPLUS" and rule.params["parameter"] == "Steepness"
    assert rule.params["min"] == 1.0 and rule.until == "6_4"


def test_data_types_and_flags() -> None:
    assert SPEC.data_types["FLOAT32"].size == 4 and SPEC.data_types["FLOAT16"].size == 2
    assert {"UNKNOWN", "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16", "INT8", "FLOAT64",
            "UINT64", "INT64"} <= set(SPEC.data_types)  # fmt: skip
    assert {f.name: (f.value, f.inputs_only) for f in SPEC.tensor_flags} == {
        "NONE": (0, False),
        "OWNED_BY_DML": (1, True),
    }
    (rule,) = [r for r in SPEC.tensor_rules if r.kind == "tensor_element_count_max"]
    assert rule.params["max"] == 2**32 - 1


def test_support_tables() -> None:
    mvn1 = SPEC.operator("MEAN_VARIANCE_NORMALIZATION1")
    assert mvn1.support_row(SPEC, SPEC.level("3_0")).tensors["InputTensor"].dimension_counts == (4,)
    assert mvn1.support_row(SPEC, SPEC.level("3_1")).tensors["ScaleTensor"].dimension_counts == tuple(
        range(1, 9)
    )
    bnt = SPEC.operator("BATCH_NORMALIZATION_TRAINING")
    assert set(bnt.support[0].tensors) == {m.name for m in bnt.tensor_members}
    for op in SPEC.operators.values():
        for row in op.support:
            for support in row.tensors.values():
                assert support.data_types == ("FLOAT32", "FLOAT16")


# --------------------------------------------------------------------------------------------
# doc_notes: the disagreements between revisions (directml-facts.md, "The seeds")


def _notes(op: str) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in SPEC.operator(op).doc_notes}


def _says(note: dict[str, Any]) -> dict[str, str]:
    return {r["seed"]: str(r["says"]) for r in note["revisions"]}


def _note_about(op: str, *words: str) -> dict[str, Any]:
    for note in SPEC.operator(op).doc_notes:
        blob = yaml.safe_dump(note)
        if all(w in blob for w in words):
            return note
    raise AssertionError(f"{op}: no doc_note mentioning {words}")


def test_doc_note_axes_equivalent_of_cross_channel_false() -> None:
    note = _note_about("MEAN_VARIANCE_NORMALIZATION1", "CrossChannel")
    says = {k: re.sub(r"\s", "", v) for k, v in _says(note).items()}
    assert says["002_8c49f7449c810d75.txt"] == "{2,3}"
    assert says["001_1e2c4731e5f1555c.txt"] == "{0,2,3}"
    assert re.sub(r"\s", "", str(note["choice"])) == "{2,3}"
    assert note["why"]


def test_doc_note_epsilon() -> None:
    note = _note_about("MEAN_VARIANCE_NORMALIZATION1", "0.000001")
    says = _says(note)
    assert says["002_8c49f7449c810d75.txt"] == "0.000001"
    assert says["001_1e2c4731e5f1555c.txt"] == "0.00001"
    assert note["choice"] == "0.00001"
    assert SPEC.operator("MEAN_VARIANCE_NORMALIZATION1").member("Epsilon").default == pytest.approx(1e-5)
    assert SPEC.operator("MEAN_VARIANCE_NORMALIZATION").member("Epsilon").default == pytest.approx(1e-5)
    assert SPEC.operator("BATCH_NORMALIZATION_TRAINING").member("Epsilon").default is None


def test_doc_note_2021_four_dims_only() -> None:
    note = _note_about("MEAN_VARIANCE_NORMALIZATION1", "003_fb088391e7819377.txt", "3_1")
    assert "4" in _says(note)["003_fb088391e7819377.txt"]
    assert note["why"]


def test_doc_notes_are_complete() -> None:
    for op in SPEC.operators.values():
        ids = [n["id"] for n in op.doc_notes]
        assert len(ids) == len(set(ids))
        for note in op.doc_notes:
            assert note["subject"] and note["revisions"] and note["choice"] and note["why"]


# --------------------------------------------------------------------------------------------
# A broken spec copy fails with file and line


@pytest.fixture
def spec_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "spec"
    shutil.copytree(SPEC_DIR, dst)
    return dst


def test_malformed_yaml_raises_spec_error_with_line(spec_copy: Path) -> None:
    path = spec_copy / "operators" / "mean_variance_normalization1.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(5, "members: [unclosed, {")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy)
    err = info.value
    assert err.file == str(path)
    assert err.line is not None and err.line >= 6
    assert str(err).startswith(f"{path}:{err.line}:")
    assert "malformed YAML" in err.message


def test_schema_violation_raises_spec_error_at_the_node(spec_copy: Path) -> None:
    path = spec_copy / "operators" / "batch_normalization_training.yaml"
    text = path.read_text(encoding="utf-8")
    assert "kind: same_sizes" in text
    path.write_text(text.replace("kind: same_sizes", "kind: roughly_same_sizes", 1), encoding="utf-8")
    want_line = next(
        i + 1
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())
        if "roughly_same_sizes" in line
    )
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy)
    err = info.value
    assert err.file == str(path)
    assert err.line == want_line
    assert "roughly_same_sizes" in err.message


def test_missing_file_raises_spec_error(spec_copy: Path) -> None:
    (spec_copy / "common" / "activations.yaml").unlink()
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy)
    assert "activations.yaml" in str(info.value)


@pytest.mark.parametrize(
    ("stem", "short"), [("lp_normalization", "MVN1"), ("lp_normalization", "BATCH_NORMALIZATION")]
)
def test_a_short_name_taken_twice_is_a_spec_error(spec_copy: Path, stem: str, short: str) -> None:
    path = spec_copy / "operators" / f"{stem}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("short_name: LP\n", f"short_name: {short}\n", 1), encoding="utf-8")
    with pytest.raises(SpecError, match=f"short name {short} is"):
        load_spec(spec_copy)


def test_good_copy_loads(spec_copy: Path) -> None:
    other = load_spec(spec_copy)
    assert set(other.operators) == set(SPEC.operators)


def test_operator_relations_are_modelled():
    """Metamorphic relations come from the spec like everything else: the runner reads them from
    Operator.relations, and every relation that names another operator names a real one."""
    spec = load_spec()
    mvn = spec.operator("MEAN_VARIANCE_NORMALIZATION")
    by_id = {r.id: r for r in mvn.relations}
    assert by_id["cross-channel-false-is-mvn1-axes-2-3"].set == {"Axes": [2, 3]}
    assert by_id["cross-channel-true-is-mvn1-axes-1-2-3"].when == {"CrossChannel": True}
    assert by_id["shift-invariant"].kind == "shift_invariant"
    for op in spec.operators.values():
        for rel in op.relations:
            assert rel.kind in ("same_output_as", "shift_invariant", "chained", "directional_derivative"), (
                rel.id
            )
            if rel.operator:
                spec.operator(rel.operator)
            for member in rel.compare:
                assert op.member(member) is not None, (op.name, rel.id, member)


# --------------------------------------------------------------------------------------------
# Spec revisions as overlays (spec-overlay.yaml)

OVERLAY_2021 = REPO / "examples" / "spec-2021"


def test_the_2021_revision_is_an_overlay_of_the_bundled_spec() -> None:
    old = load_spec(OVERLAY_2021)
    assert set(old.operators) == set(SPEC.operators)
    mvn1_old, mvn1_new = (
        old.operator("MEAN_VARIANCE_NORMALIZATION1"),
        SPEC.operator("MEAN_VARIANCE_NORMALIZATION1"),
    )
    assert Path(mvn1_old.path).parent.parent == OVERLAY_2021
    assert {r.id for r in mvn1_old.rules} != {r.id for r in mvn1_new.rules}
    bn = old.operator("BATCH_NORMALIZATION")
    assert (
        Path(bn.path).parent.parent == REPO / "spec"
        and bn.rules == SPEC.operator("BATCH_NORMALIZATION").rules
    )
    assert old.activations == SPEC.activations


def _copy_spec(dst: Path) -> Path:
    shutil.copytree(REPO / "spec", dst)
    return dst


def test_an_overlay_picks_up_operators_added_to_its_base(tmp_path: Path) -> None:
    base = _copy_spec(tmp_path / "base")
    text = (base / "operators" / "batch_normalization.yaml").read_text(encoding="utf-8")
    (base / "operators" / "batch_normalization_copy.yaml").write_text(
        text.replace("operator: BATCH_NORMALIZATION\n", "operator: BATCH_NORMALIZATION_COPY\n").replace(
            "short_name: BN\n", "short_name: BNC\n"
        ),
        encoding="utf-8",
    )
    rev = tmp_path / "rev"
    (rev / "operators").mkdir(parents=True)
    (rev / "operators" / "mean_variance_normalization1.yaml").write_text(
        (OVERLAY_2021 / "operators" / "mean_variance_normalization1.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    (rev / "spec-overlay.yaml").write_text(
        "base: ../base\nreplace: [operators/mean_variance_normalization1.yaml]\n", encoding="utf-8"
    )
    spec = load_spec(rev)
    assert "BATCH_NORMALIZATION_COPY" in spec.operators
    assert (
        spec.operator("mvn1").rules == spec.operator("MEAN_VARIANCE_NORMALIZATION1").rules
    )  # the overlay's own
    assert (
        spec.operator("MEAN_VARIANCE_NORMALIZATION1").rules
        == load_spec(OVERLAY_2021).operator("MEAN_VARIANCE_NORMALIZATION1").rules
    )
    # remove: drops a base file (a new directory: load_spec caches per directory)
    rev2 = tmp_path / "rev2"
    rev2.mkdir()
    (rev2 / "spec-overlay.yaml").write_text(
        "base: ../base\nremove: [operators/batch_normalization_copy.yaml]\n", encoding="utf-8"
    )
    assert "BATCH_NORMALIZATION_COPY" not in load_spec(rev2).operators


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ("base: ../nowhere\n", "is not a directory"),
        ("base: ../base\nreplace: [operators/not_there.yaml]\n", "is not a file of the base"),
        ("base: ../base\nadd: [operators/batch_normalization.yaml]\n", "already in the base"),
        ("replace: []\n", "needs 'base"),
        ("base: ../base\nextra: 1\n", "unknown overlay key"),
    ],
)
def test_a_broken_overlay_is_one_line_spec_error(tmp_path: Path, overlay: str, message: str) -> None:
    _copy_spec(tmp_path / "base")
    rev = tmp_path / "rev"
    rev.mkdir()
    (rev / "spec-overlay.yaml").write_text(overlay, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(rev)
    assert message in err.value.one_line() and "\n" not in err.value.one_line()
