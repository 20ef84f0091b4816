"""The ``validate`` and ``spec lint`` verbs as a user runs them: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dmlconform.cli import main
from dmlconform.specification.spec import default_spec_dir

ONE_SIDED_SCALE = """\
type: MEAN_VARIANCE_NORMALIZATION1
desc:
  InputTensor:  {DataType: FLOAT32, Sizes: [2, 3, 4, 5]}
  ScaleTensor:  {DataType: FLOAT32, Sizes: [1, 3, 1, 1]}
  OutputTensor: {DataType: FLOAT32, Sizes: [2, 3, 4, 5]}
  Axes: [2, 3]
  NormalizeVariance: true
"""


@pytest.fixture
def one_sided(tmp_path: Path) -> Path:
    p = tmp_path / "one_sided.yaml"
    p.write_text(ONE_SIDED_SCALE)
    return p


def test_one_sided_scale_illegal_before_5_2_legal_from_5_2(one_sided: Path, capsys) -> None:
    # MVN1 latest revision: "DML_FEATURE_LEVEL_5_2 미만인 경우 BiasTensor가 있는 경우 이 텐서가 필요합니다."
    assert main(["validate", str(one_sided), "--feature-level", "5_1"]) == 1
    out = capsys.readouterr().out
    assert "[scale-bias-paired] BiasTensor" in out
    assert "seed 002_8c49f7449c810d75.txt" in out
    assert main(["validate", str(one_sided), "--feature-level", "DML_FEATURE_LEVEL_5_2"]) == 0
    assert ": legal" in capsys.readouterr().out


def test_json_format_has_one_object_per_file(one_sided: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "legal.json"
    other.write_text(
        json.dumps(
            {
                "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION",
                "desc": {
                    "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Sizes": [1, 2, 3, 4]},
                    "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2, 3, 4]},
                    "CrossChannel": False,
                    "NormalizeVariance": True,
                },
            }
        )
    )
    assert main(["validate", str(one_sided), str(other), "-l", "4.0", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [d["legal"] for d in data] == [False, True]
    assert set(data[0]) == {"file", "operator", "feature_level", "legal", "violations"}
    assert data[0]["feature_level"] == "4_0"
    assert data[0]["operator"] == "MEAN_VARIANCE_NORMALIZATION1"
    assert set(data[0]["violations"][0]) == {"rule", "member", "message", "source"}
    assert data[1]["violations"] == []


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("type: [unclosed\n", "malformed YAML: line 2"),
        ("- just\n- a list\n", "must be a mapping"),
        ("type: NOT_AN_OPERATOR\ndesc: {}\n", "unknown operator 'NOT_AN_OPERATOR'"),
        ("type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {InputTensr: null}\n", "desc.InputTensr: unknown member"),
        (
            "type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {InputTensor: {DataType: FLOAT33, Sizes: [1]}}\n",
            "desc.InputTensor.DataType: unknown data type 'FLOAT33'",
        ),
        (
            "type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {InputTensor: {DataType: FLOAT32, Sizes: '1,2'}}\n",
            "desc.InputTensor.Sizes: expected a list of UINTs",
        ),
        (
            "type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {InputTensor: {DataType: FLOAT32, Sizes: [1, -2]}}\n",
            "desc.InputTensor.Sizes[1]: expected a UINT",
        ),
        ("type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {Axes: [1, 2.5]}\n", "desc.Axes[1]: expected a UINT"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(tmp_path: Path, capsys, content: str, needle: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(content)
    assert main(["validate", str(p), "-l", "5_2"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert str(p) in err
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_missing_required_member_is_a_violation_not_an_error(tmp_path: Path, capsys) -> None:
    p = tmp_path / "no_output.yaml"
    p.write_text(
        "type: MEAN_VARIANCE_NORMALIZATION1\ndesc:\n  InputTensor: {DataType: FLOAT32, Sizes: [1, 2, 3, 4]}\n"
        "  Axes: [2, 3]\n  NormalizeVariance: false\n"
    )
    assert main(["validate", str(p), "-l", "5_2", "--format", "json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)
    assert [(v["rule"], v["member"]) for v in entry["violations"]] == [("required-members", "OutputTensor")]


def test_unknown_level_and_missing_file(one_sided: Path, capsys) -> None:
    assert main(["validate", str(one_sided), "-l", "7_7"]) == 2
    assert "unknown feature level '7_7'" in capsys.readouterr().err
    assert main(["validate", "/nonexistent/x.yaml", "-l", "5_2"]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_console_script_runs_without_traceback(one_sided: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dmlconform.cli", "validate", str(one_sided), "-l", "5_1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "scale-bias-paired" in proc.stdout


def test_spec_lint_clean_on_bundled_spec(capsys) -> None:
    assert main(["spec", "lint"]) == 0
    assert "OK" in capsys.readouterr().out


def test_spec_lint_reports_file_line_column(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(default_spec_dir(), spec)
    path = spec / "operators" / "mean_variance_normalization1.yaml"
    text = path.read_text()
    text = text.replace(
        'members: [ScaleTensor, BiasTensor]\n    until: "5_2"',
        'members: [ScaleTensor, BiasTensr]\n    until: "5_2"',
    )
    path.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "BiasTensr" in s)
    assert main(["spec", "lint", "--spec-dir", str(spec)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:{line}:" in out
    assert "unknown member 'BiasTensr'" in out


def test_spec_lint_schema_error_and_malformed_yaml(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(default_spec_dir(), spec)
    path = spec / "operators" / "batch_normalization_training.yaml"
    path.write_text(
        path.read_text()
        .replace("kind: paired_presence", "kind: paired_presense")
        .replace("kind: same_sizes", "kind: same_sizez", 1)
    )
    assert main(["spec", "lint", "--spec-dir", str(spec)]) == 1
    assert "same_sizez" in capsys.readouterr().out
    path.write_text("operator: [\n")
    assert main(["spec", "lint", "--spec-dir", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2:" in err and "malformed YAML" in err


def test_edited_spec_dir_changes_verdict(one_sided: Path, tmp_path: Path) -> None:
    """--spec-dir lets a user try an edited spec: lift the pairing rule and 5_1 becomes legal."""
    spec = tmp_path / "spec"
    shutil.copytree(default_spec_dir(), spec)
    path = spec / "operators" / "mean_variance_normalization1.yaml"
    path.write_text(
        path.read_text().replace(
            'until: "5_2"\n    source: {<<: *latest, section: ScaleTensor',
            'until: "5_1"\n    source: {<<: *latest, section: ScaleTensor',
        )
    )
    assert main(["validate", str(one_sided), "-l", "5_1", "--spec-dir", str(spec)]) == 0
