"""One error style on every verb: ``dmlconform <verb>: error: ...`` on one line, exit 2, never a
traceback or pytest's INTERNALERROR; messages that name options name the command's own."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import REPO, SMALL, dmlconform

from dmlconform.cli import build_parser, prog
from dmlconform.runner.directories import directory_problem

NUMERIC = [*SMALL, "--kinds", "numeric"]
ONE_OP = [
    "--operators",
    "MEAN_VARIANCE_NORMALIZATION1",
    "--kinds",
    "numeric",
    "--tier",
    "smoke",
    "--cases",
    "1",
]


def one_error_line(proc, prefix: str) -> str:  # type: ignore[no-untyped-def]
    """The single stderr line of a refused command, checked for the house style."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{prefix}: error: "), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout and "INTERNALERROR" not in proc.stderr + proc.stdout
    return lines[0]


@pytest.mark.parametrize(
    ("where", "reason"),
    [("afile", "exists and is not a directory"), ("afile/sub", "cannot write there: Not a directory")],
)
def test_run_refuses_an_unusable_report_directory(tmp_path: Path, where: str, reason: str) -> None:
    (tmp_path / "afile").write_text("not a directory")
    proc = dmlconform("run", "--backend", "reference", *NUMERIC, "--report", where, cwd=tmp_path)
    line = one_error_line(proc, "dmlconform run")
    assert line.endswith(reason) and "--report" in line
    assert (tmp_path / "afile").read_text() == "not a directory"


@pytest.mark.parametrize(
    "late",
    [
        ["--dtypes", "BOGUS"],  # found once the spec is loaded
        ["--expect", "missing.txt"],  # once the backend is loaded
        ["--tolerance", "nope=1"],
        ["--", "-k", "no_case_has_this_name"],  # by pytest: no case selected
        ["--", "numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT32-9999]"],  # by pytest: no such case
    ],
    ids=["dtypes", "expect", "tolerance", "no-case-selected", "no-such-case"],
)
@pytest.mark.parametrize("report", [["--report", "r/deeper"], []], ids=["report", "default-report"])
def test_a_late_usage_error_leaves_no_report_directory(
    tmp_path: Path, late: list[str], report: list[str]
) -> None:
    """Arguments found bad after start-up (past argparse) leave neither the report directory nor
    the directories made for it; one that existed before stays, with what it held."""
    proc = dmlconform("run", "--backend", "reference", *NUMERIC, *report, *late, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "reports").exists()
    assert "report: " not in proc.stdout  # no report announced either


def test_a_late_usage_error_keeps_a_report_directory_that_was_there(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    proc = dmlconform(
        "run", "--backend", "reference", *NUMERIC, "--report", "mine/r", "--dtypes", "X", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_an_unwritable_directory_is_found_by_writing_not_by_permission_bits(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert "exists and is not a directory" in (directory_problem(tmp_path / "f") or "")
    assert "cannot write there" in (directory_problem(tmp_path / "f" / "x") or "")
    assert directory_problem(tmp_path / "new" / "deeper") is None
    assert (tmp_path / "new" / "deeper").is_dir() and not any((tmp_path / "new" / "deeper").iterdir())


def test_run_with_a_missing_spec_dir_is_one_line(tmp_path: Path) -> None:
    proc = dmlconform("run", "--backend", "reference", "--spec-dir", "nope", cwd=tmp_path)
    assert one_error_line(proc, "dmlconform run").endswith("spec directory not found")


def test_run_usage_errors_use_the_run_style(tmp_path: Path) -> None:
    proc = dmlconform("run", "--backend", "no-such-backend", cwd=tmp_path)
    assert "unknown backend 'no-such-backend'" in one_error_line(proc, "dmlconform run")
    assert "ERROR:" not in proc.stderr


@pytest.mark.parametrize("verb", ["run", "replay"])
def test_a_negative_timeout_is_refused(tmp_path: Path, verb: str) -> None:
    if verb == "run":
        proc = dmlconform("run", "--backend", "reference", *NUMERIC, "--timeout", "-1", cwd=tmp_path)
    else:
        case = next((REPO / "tests" / "fixtures" / "cases").iterdir())
        proc = dmlconform("replay", str(case), "--backend", "reference", "--timeout", "-1", cwd=tmp_path)
    line = one_error_line(proc, f"dmlconform {verb}")
    assert line.endswith("--timeout must not be negative (0 disables it)")


def test_generate_out_on_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    proc = dmlconform(
        "generate",
        "MEAN_VARIANCE_NORMALIZATION1",
        "-l",
        "5_1",
        "--count",
        "2",
        "--out",
        "afile",
        cwd=tmp_path,
    )
    assert one_error_line(proc, "dmlconform generate").endswith("--out afile: exists and is not a directory")


def test_shrink_out_on_an_existing_file_refuses_before_shrinking(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    run = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *NUMERIC, "--report", "r", cwd=tmp_path
    )
    assert run.returncode == 1, run.stdout[-2000:]
    (failure, *_) = sorted((tmp_path / "r" / "failures").iterdir())
    t0 = time.monotonic()
    proc = dmlconform("shrink", str(failure), "--out", "afile", cwd=tmp_path)
    assert one_error_line(proc, "dmlconform shrink").endswith("--out afile: exists and is not a directory")
    assert time.monotonic() - t0 < 30  # the search never started (it prints steps to stderr)


def test_execute_refuses_an_illegal_desc_by_its_rule_before_allocating(tmp_path: Path) -> None:
    """2^53 elements (64 PiB of float64): the rule is named, nothing is allocated."""
    (tmp_path / "huge.yaml").write_text(
        "type: MEAN_VARIANCE_NORMALIZATION1\n"
        "desc:\n"
        "  InputTensor: {DataType: FLOAT32, Sizes: [1048576, 1048576, 1024, 8]}\n"
        "  OutputTensor: {DataType: FLOAT32, Sizes: [1048576, 1048576, 1024, 8]}\n"
        "  Axes: [2, 3]\n"
        "  NormalizeVariance: true\n"
    )
    proc = dmlconform("execute", "huge.yaml", cwd=tmp_path)
    line = one_error_line(proc, "dmlconform execute")
    assert "illegal at every feature level" in line and "[tensor-element-count-max]" in line
    assert "MemoryError" not in line


def test_execute_runs_a_desc_legal_at_some_level_only(tmp_path: Path) -> None:
    """One-sided Scale is legal from 5_2 on, illegal before: a desc, not a level, is executed."""
    desc = REPO / "examples" / "descs" / "mvn1_scale_only_elu.yaml"
    proc = dmlconform("execute", str(desc), cwd=tmp_path)
    assert proc.returncode == 0 and "OutputTensor: shape" in proc.stdout, proc.stderr


def test_execute_inputs_that_are_not_an_npz(tmp_path: Path) -> None:
    desc = REPO / "examples" / "descs" / "mvn1_channel_broadcast.yaml"
    proc = dmlconform("execute", str(desc), "--inputs", str(desc), cwd=tmp_path)
    line = one_error_line(proc, "dmlconform execute")
    assert "not an .npz file" in line and "pickle" not in line


def test_a_hang_under_run_names_runs_own_isolate_option(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:Hangs", *NUMERIC, "--timeout", "1", "--report", "r",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    messages = [
        c["message"] or "" for c in json.loads((tmp_path / "r" / "results.json").read_text())["cases"]
    ]
    hung = [m for m in messages if "did not return within" in m]
    assert hung and all("use --isolate to kill hung calls" in m for m in hung)
    assert "--dml-" not in proc.stdout + proc.stderr + "".join(messages)


def test_a_backend_claiming_an_unknown_level_is_refused_or_told(tmp_path: Path) -> None:
    refused = dmlconform("run", "--backend", "test_plugin_backends:ClaimsSeven", *ONE_OP, cwd=tmp_path)
    line = one_error_line(refused, "dmlconform run")
    assert "claims feature level '7_0', which this spec does not know" in line
    assert "pass --feature-level" in line and "--dml-" not in line
    told = dmlconform(
        "run", "--backend", "test_plugin_backends:ClaimsSeven", *NUMERIC, "--report", "r", cwd=tmp_path
    )
    assert told.returncode == 0, told.stdout[-2000:] + told.stderr[-2000:]
    assert "dmlconform: note: backend nocheck claims feature level 7_0" in told.stdout
    assert "tested at 2_1, as --feature-level asks" in told.stdout


def test_a_run_above_the_backends_claim_says_so(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:ClaimsFiveTwo", *ONE_OP, "--feature-level", "6_4",
        "--report", "r", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "dmlconform: note: tested at 6_4, above the 5_2 backend nocheck claims" in proc.stdout


def test_prog_names_the_verb_and_action() -> None:
    parser = build_parser()
    assert prog(parser.parse_args(["execute", "x.yaml"])) == "dmlconform execute"
    assert prog(parser.parse_args(["dxdispatch", "check", "b"])) == "dmlconform dxdispatch check"
    assert prog(parser.parse_args(["spec", "lint"])) == "dmlconform spec lint"
    assert prog(parser.parse_args(["spec-diff", "--from", "4_0", "--to", "5_2"])) == "dmlconform spec-diff"


def test_an_os_error_anywhere_is_one_line_in_the_verbs_style(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dmlconform import cli
    from dmlconform.commands import validate

    def boom(args):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", "/somewhere/file")

    monkeypatch.setattr(validate, "run", boom)
    assert cli.main(["validate", "x.yaml", "-l", "6_4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "dmlconform validate: error: /somewhere/file: Permission denied"


def test_spec_lint_says_when_it_skips_the_quote_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As from an installed package: the spec without the doc seeds beside it."""
    import shutil

    from dmlconform import cli

    shutil.copytree(REPO / "spec", tmp_path / "pkg" / "_spec")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["spec", "lint", "--spec-dir", str(tmp_path / "pkg" / "_spec")]) == 0
    out, err = capsys.readouterr()
    assert "note: quote checks skipped: the seed documents were not found" in err and "--seeds-dir" in err
    assert out.strip().endswith("spec files OK (quotes not checked: no seeds)")
    seeds = REPO.parent / "shared" / "seeds"
    if seeds.is_dir():  # with them, the quotes are checked and it says against what
        assert (
            cli.main(
                ["spec", "lint", "--spec-dir", str(tmp_path / "pkg" / "_spec"), "--seeds-dir", str(seeds)]
            )
            == 0
        )
        out, err = capsys.readouterr()
        assert "skipped" not in err and f"quotes checked against {seeds}" in out
    assert cli.main(["spec", "lint", "--seeds-dir", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith("dmlconform spec lint: error: --seeds-dir")


def test_the_directml_backend_refuses_an_unknown_release_by_name() -> None:
    """At option parsing, before any stack is looked for, and even beside a dll= that would
    leave the version unused."""
    from dmlconform.backends import BackendError, load_backend

    with pytest.raises(
        BackendError, match=r"option version='banana': unknown DirectML version 'banana'; known: "
    ):
        load_backend("directml", {"version": "banana", "dll": "/nonexistent/DirectML.dll"})


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["run", "--backend", "reference", *NUMERIC, "--report", ""], "--report"),
        (["run", "--backend", "reference", *NUMERIC, "--expect", " "], "--expect"),
        (["generate", "MEAN_VARIANCE_NORMALIZATION1", "-l", "6_4", "-o", ""], "--out"),
        (["implementations", "somewhere", "--findings", ""], "--findings"),
        (["validate", "-l", "6_4", "x.yaml", "--spec-dir", ""], "--spec-dir"),
        (["validate", "-l", "6_4", "x.yaml", ""], "FILES"),  # walked every file below the working directory
        (["execute", ""], "DESC"),
        (["report", "render", ""], "DIR"),
    ],
    ids=[
        "run-report",
        "run-expect",
        "generate-out",
        "implementations-findings",
        "spec-dir",
        "validate-files",
        "execute-desc",
        "report-dir",
    ],  # fmt: skip
)
def test_an_empty_path_is_refused_not_read_as_the_default(
    tmp_path: Path, argv: list[str], option: str
) -> None:
    """``--report "$DIR"`` with DIR unset: run wrote its report to the default directory and
    generate wrote into the working directory, as if nothing had been given; an empty DESC or
    FILES read as the working directory."""
    proc = dmlconform(*argv, cwd=tmp_path)
    verb = " ".join(argv[:2]) if argv[0] == "report" else argv[0]  # report's action is in its prefix
    line = one_error_line(proc, f"dmlconform {verb}")
    assert line.endswith(f"{option}: an empty path (a variable left unset?)"), line
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere
