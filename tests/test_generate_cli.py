"""``dmlconform generate``: files written, expectations recorded, errors are one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlconform.cli import main
from dmlconform.specification.desc import load_desc
from dmlconform.specification.validate import validate


def test_legal_with_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "generate",
            "MEAN_VARIANCE_NORMALIZATION1",
            "-l",
            "5_2",
            "--count",
            "4",
            "--with-data",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    assert "wrote 4 legal" in capsys.readouterr().out
    yamls = sorted(tmp_path.glob("*.yaml"))
    assert len(yamls) == 4
    for path in yamls:
        assert path.read_text().startswith("# expect: legal\n")
        desc = load_desc(path)
        assert validate(desc, "5_2") == []
        arrays = np.load(path.with_suffix(".npz"))
        assert "InputTensor" in arrays.files
        assert arrays["InputTensor"].shape == desc.members["InputTensor"].sizes


def test_illegal_records_the_rule(tmp_path: Path) -> None:
    rc = main(
        [
            "generate",
            "MEAN_VARIANCE_NORMALIZATION",
            "-l",
            "3_0",
            "--illegal",
            "--count",
            "25",
            "--seed",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    for path in tmp_path.glob("*.yaml"):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# expect: illegal rule=")
        rule = first.split("rule=")[1]
        assert path.stem.endswith(rule)
        assert {v.rule for v in validate(load_desc(path), "3_0")} == {rule}


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "NO_SUCH_OP", "-l", "5_2"],
        ["generate", "MEAN_VARIANCE_NORMALIZATION", "-l", "9_9"],
        ["generate", "MEAN_VARIANCE_NORMALIZATION", "-l", "5_2", "--with-data", "--regime", "nope"],
    ],
)
def test_unusable_input_exits_2(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dmlconform generate: error:") and "\n" not in err


def test_edges_writes_the_edge_corpus_each_legal_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "LP_NORMALIZATION", "-l", "6_4", "--edges", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    yamls = sorted(tmp_path.glob("*.yaml"))
    assert f"wrote {len(yamls)} edge LP_NORMALIZATION descs at 6_4" in out
    rules = set()
    for path in yamls:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# expect: legal edge=")
        rules.add(first.split("edge=")[1].split(":")[0])
        assert validate(load_desc(path), "6_4") == [], path.name
    assert {"tensor-alignment", "tensor-output-distinct-strides", "p-one-or-two", "member"} <= rules


def test_edges_refuse_with_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["generate", "LP_NORMALIZATION", "-l", "6_4", "--edges", "--with-data", "--out", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--with-data applies to legal descs only" in err
