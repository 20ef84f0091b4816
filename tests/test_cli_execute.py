"""``dmlconform execute``: outputs, summary, and one-line errors with exit status 2."""

from __future__ import annotations

import numpy as np
import pytest

from dmlconform.cli import main

DESC = """\
type: DML_OPERATOR_BATCH_NORMALIZATION_TRAINING
desc:
  InputTensor:  {DataType: FLOAT32, Sizes: [2, 3, 2, 2]}
  ScaleTensor:  {DataType: FLOAT32, Sizes: [1, 3, 1, 1]}
  BiasTensor:   {DataType: FLOAT32, Sizes: [1, 3, 1, 1]}
  OutputTensor: {DataType: FLOAT32, Sizes: [2, 3, 2, 2]}
  OutputMeanTensor: {DataType: FLOAT32, Sizes: [1, 3, 1, 1]}
  OutputVarianceTensor: {DataType: FLOAT32, Sizes: [1, 3, 1, 1]}
  Epsilon: 0.0
"""


@pytest.fixture
def desc_file(tmp_path):
    p = tmp_path / "bn.yaml"
    p.write_text(DESC)
    return p


def _inputs(tmp_path, **override):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    arrays = {
        "InputTensor": x,
        "ScaleTensor": np.ones((1, 3, 1, 1), np.float32),
        "BiasTensor": np.zeros((1, 3, 1, 1), np.float32),
    }
    arrays.update(override)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return path


def test_execute_writes_outputs(desc_file, tmp_path, capsys):
    out = tmp_path / "out.npz"
    assert main(["execute", str(desc_file), "--inputs", str(_inputs(tmp_path)), "--output", str(out)]) == 0
    with np.load(out) as npz:
        # channel c holds {4c..4c+3} and {12+4c..12+4c+3}: mean 4c + 7.5
        np.testing.assert_array_equal(npz["OutputMeanTensor"].ravel(), [7.5, 11.5, 15.5])
        x = np.arange(24, dtype=np.float64).reshape(2, 3, 2, 2)[:, 0]
        var = x.var()
        assert npz["OutputVarianceTensor"].ravel()[0] == np.float32(var)
        assert npz["OutputTensor"].shape == (2, 3, 2, 2) and npz["OutputTensor"].dtype == np.float32


def test_execute_prints_a_summary_without_output(desc_file, tmp_path, capsys):
    assert main(["execute", str(desc_file), "--inputs", str(_inputs(tmp_path))]) == 0
    text = capsys.readouterr().out
    assert "OutputTensor: shape [2, 3, 2, 2] float32" in text
    assert "OutputMeanTensor: shape [1, 3, 1, 1] float32  min 7.5  max 15.5  mean 11.5" in text


def test_execute_generates_inputs_when_none_given(desc_file, capsys):
    assert main(["execute", str(desc_file), "--seed", "3"]) == 0
    first = capsys.readouterr().out
    assert main(["execute", str(desc_file), "--seed", "3"]) == 0
    assert capsys.readouterr().out == first and "OutputVarianceTensor" in first


@pytest.mark.parametrize(
    "override, member",
    [
        ({"ScaleTensor": None}, "ScaleTensor"),
        ({"BiasTensor": np.zeros((3, 1, 1, 1), np.float32)}, "BiasTensor"),
        ({"Bogus": np.zeros(3, np.float32)}, "Bogus"),
    ],
)
def test_missing_or_misshapen_input_is_one_line_exit_2(desc_file, tmp_path, capsys, override, member):
    assert main(["execute", str(desc_file), "--inputs", str(_inputs(tmp_path, **override))]) == 2
    err = capsys.readouterr().err
    assert member in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unreadable_desc_and_inputs_exit_2(tmp_path, desc_file, capsys):
    assert main(["execute", str(tmp_path / "nope.yaml")]) == 2
    assert main(["execute", str(desc_file), "--inputs", str(tmp_path / "nope.npz")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2


def test_a_legal_desc_too_large_for_memory_is_one_line(tmp_path):
    """A legal desc may hold 2^32 - 1 elements (tensor-element-count-max's edge): generating its
    inputs raised MemoryError outside the command's guard ("internal error", two lines). The
    process's address space is capped so that the allocation fails on any machine."""
    import resource

    from helpers import dmlconform

    desc = tmp_path / "huge.yaml"
    desc.write_text(
        "type: DML_OPERATOR_LP_NORMALIZATION\n"
        "desc:\n"
        "  InputTensor: {DataType: FLOAT16, Sizes: [4294967294]}\n"
        "  OutputTensor: {DataType: FLOAT16, Sizes: [4294967294]}\n"
        "  Axis: 0\n"
        "  Epsilon: 1.0e-12\n"
        "  P: 2\n"
    )
    cap = 8 << 30

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    proc = dmlconform("execute", desc.name, cwd=tmp_path, preexec_fn=limit)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        f"dmlconform execute: error: {desc.name}: not enough memory to run the reference on this desc ("
    )
