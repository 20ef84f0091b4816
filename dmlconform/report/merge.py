"""``dmlconform report merge``: join the reports of a sharded run (``run --shard K/N``) into one.

The merged directory is what the unsharded run would have written: the same results.json apart
from timing and host fields (started, finished, duration_s, versions, and ``merged_from``, which
records the shards), the reproducer directories of every failing case, one junit.xml, and
index.html / summary.md rendered from the merged results.json.

Merging is refused (:class:`MergeError`, a one-line message) when the reports cannot be parts of
one run: a setting differs, a shard is missing or given twice, two reports hold the same case, or
a report is incomplete (unless ``allow_incomplete``, and then the merged report is incomplete too).
Settings are compared generically: every top-level field of results.json except the per-run ones
below, so a selection setting added later is compared without a change here.
"""

from __future__ import annotations

import json
import shlex
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlconform.report.classes import accuracy_classes, finding_counts
from dmlconform.report.junit_file import completion_properties
from dmlconform.report.results_file import write_results_file
from dmlconform.report.results_reader import Results, ResultsError, load_results, results_path

# Fields that differ between the shards of one run (or are recomputed from the cases); every other
# top-level field must be equal in all shards.
PER_RUN_FIELDS = frozenset(
    {
        "cases",
        "summary",
        "coverage",
        "known_findings",
        "accuracy_classes",
        "command",
        "started",
        "finished",
        "duration_s",
        "versions",
        "shard",
        "complete",
        "status",
        "stop_reason",
        "exit_status",
        "collected",
        "ran",
        "deselected",
        "merged_from",
    }
)
SUMMARY_KEYS = ("total", "passed", "failed", "skipped", "xfailed", "xpassed", "errors")
OUR_OUTPUTS = ("results.json", "junit.xml", "index.html", "summary.md", "failures")


class MergeError(ResultsError):
    """The reports cannot be merged into one run's report (the message says why)."""


@dataclass
class Part:
    """One input report: its results, directory and shard (an unsharded run is shard 1/1)."""

    results: Results
    directory: Path
    label: str
    index: int
    count: int

    @property
    def shard(self) -> str:
        return f"{self.index}/{self.count}"


def _part(path: str | Path) -> Part:
    results = load_results(path)
    file = results_path(path)
    shard = results.data.get("shard")
    index, count = 1, 1
    if isinstance(shard, dict):
        try:
            index, count = int(shard["index"]), int(shard["count"])
        except (KeyError, TypeError, ValueError):
            raise MergeError(f"{file}: malformed 'shard' field {shard!r}") from None
    return Part(results, file.parent, str(path), index, count)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _first_difference(a: Any, b: Any, where: str) -> tuple[str, Any, Any] | None:
    """The path and values of the first difference between two JSON values, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            found = _first_difference(a.get(key), b.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    return None if a == b else (where, a, b)


def _check_settings(parts: list[Part]) -> None:
    base = parts[0]
    for part in parts[1:]:
        keys = [k for k in base.results.data if k not in PER_RUN_FIELDS]
        keys += [k for k in part.results.data if k not in PER_RUN_FIELDS and k not in base.results.data]
        for key in keys:
            found = _first_difference(base.results.data.get(key), part.results.data.get(key), key)
            if found:
                where, a, b = found
                raise MergeError(
                    f"reports are from different runs: {where} is {_short(a)} in {base.label} "
                    f"but {_short(b)} in {part.label}"
                )
        if part.count != base.count:
            raise MergeError(
                f"reports are from different shardings: {base.label} is shard {base.shard}, "
                f"{part.label} is shard {part.shard}"
            )


def _check_shards(parts: list[Part], allow_incomplete: bool) -> list[str]:
    """Refuse duplicates; return the missing shards (an error unless ``allow_incomplete``)."""
    seen: dict[int, Part] = {}
    for part in parts:
        if part.index in seen:
            raise MergeError(f"shard {part.shard} given twice: {seen[part.index].label} and {part.label}")
        seen[part.index] = part
    count = parts[0].count
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing and not allow_incomplete:
        raise MergeError(
            f"missing shard(s) {', '.join(missing)} of {count} (given: "
            f"{', '.join(p.shard for p in sorted(parts, key=lambda p: p.index))}); "
            "pass --allow-incomplete to merge the others"
        )
    return missing


def _check_complete(parts: list[Part], allow_incomplete: bool) -> list[str]:
    notes = []
    for part in parts:
        reason = part.results.incomplete_reason()
        if reason is None:
            continue
        if not allow_incomplete:
            raise MergeError(
                f"{part.label}: incomplete report, {reason}; pass --allow-incomplete to merge it anyway"
            )
        notes.append(f"shard {part.shard} {reason}")
    return notes


def _summarize(records: list[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(SUMMARY_KEYS, 0)
    for record in records:
        counts["total"] += 1
        outcome = record.get("outcome")
        key = "errors" if outcome == "error" else str(outcome)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _merge_coverage(parts: list[Part]) -> dict[str, Any]:
    merged: dict[str, dict[str, dict[str, int | None]]] = {}
    for part in parts:
        for op, rules in part.results.coverage.items():
            table = merged.setdefault(op, {})
            for rule, counts in (rules or {}).items():
                entry = table.setdefault(rule, {})
                for key, n in (counts or {}).items():
                    # None (no legal desc can sit at the rule's edge) stays None in every shard
                    if n is None and entry.get(key) is None:
                        entry[key] = None
                    else:
                        entry[key] = int(entry.get(key) or 0) + int(n or 0)
    return merged


def unsharded_command(command: str) -> str:
    """The command with its ``--shard K/N`` (or ``--dml-shard``) removed: the unsharded run's."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return command
    out: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token in ("--shard", "--dml-shard"):
            skip = True
            continue
        if token.startswith(("--shard=", "--dml-shard=")):
            continue
        out.append(token)
    return shlex.join(out)


def _replay(command: str | None, reproducer: str, new_dir: Path) -> str | None:
    """The replay command pointed at the merged report's copy of the reproducer directory."""
    if not command:
        return command
    try:
        tokens = shlex.split(command)
    except ValueError:
        return command
    tail = Path(reproducer).as_posix()
    for i, token in enumerate(tokens):
        if Path(token).as_posix().endswith(tail):
            tokens[i] = str(new_dir)
            return shlex.join(tokens)
    return command


def _prepare_out(out: Path, inputs: list[Part]) -> None:
    out = out.resolve()
    for part in inputs:
        if part.directory.resolve() == out:
            raise MergeError(f"--out {out} is one of the reports being merged")
    if out.exists() and not out.is_dir():
        raise MergeError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not (out / "results.json").is_file():
            raise MergeError(f"--out {out}: directory is not empty and holds no report")
        for name in OUR_OUTPUTS:  # an earlier merge or run here: replace it whole
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _copy_reproducers(part: Part, records: list[dict[str, Any]], out: Path) -> None:
    for record in records:
        rel = record.get("reproducer")
        if not rel:
            continue
        src, dst = part.directory / rel, out / rel
        if not src.is_dir():
            raise MergeError(
                f"{part.label}: reproducer {rel} is missing (merge whole report directories, not "
                "results.json alone)"
            )
        shutil.copytree(src, dst)
        record["replay"] = _replay(record.get("replay"), rel, dst)
        case_json = dst / "case.json"
        if case_json.is_file():
            try:
                saved = json.loads(case_json.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            saved["replay"] = _replay(saved.get("replay"), rel, dst)
            case_json.write_text(json.dumps(saved, indent=1), encoding="utf-8")


def _point_at(cases: list[ET.Element], shard_dir: Path, out: Path) -> None:
    """A failure's text names its replay command, whose reproducer path is under the shard's
    directory: point it at the merged report's copy, as results.json's replay is."""
    old, new = str(shard_dir.resolve()), str(out.resolve())
    for case in cases:
        for child in case:
            if child.get("message") and old in child.get("message", ""):
                child.set("message", child.get("message", "").replace(old, new))
            if child.text and old in child.text:
                child.text = child.text.replace(old, new)


def _without_completion(properties: ET.Element) -> ET.Element:
    """A shard's <properties> without the ``dmlconform_*`` ones, which speak for that shard alone."""
    kept = ET.Element(properties.tag, dict(properties.attrib))
    kept.extend(p for p in properties if not str(p.get("name") or "").startswith("dmlconform_"))
    return kept


def _merge_junit(parts: list[Part], out: Path, done: dict[str, Any]) -> Path | None:
    """One junit.xml: the shards' test cases dealt back in round-robin order (which restores the
    collection order of serial shards), the counters summed, and the merged run's completion
    properties (``done``: its results.json) where it is incomplete. None when a shard has none."""
    suites = []
    for part in parts:
        path = part.directory / "junit.xml"
        if not path.is_file():
            return None
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise MergeError(f"{path}: not valid XML ({exc})") from None
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        if suite is None:
            raise MergeError(f"{path}: no <testsuite> element")
        suites.append(suite)
    merged_root = ET.Element("testsuites", {"name": "pytest tests"})
    first = suites[0]
    merged = ET.SubElement(merged_root, "testsuite", dict(first.attrib))
    for key in ("errors", "failures", "skipped", "tests"):
        merged.set(key, str(sum(int(s.get(key) or 0) for s in suites)))
    merged.set("time", f"{max(float(s.get('time') or 0) for s in suites):.3f}")
    stamps = [s.get("timestamp") for s in suites if s.get("timestamp")]
    if stamps:
        merged.set("timestamp", min(stamps))
    for child in first:
        if child.tag == "testcase":
            continue
        if child.tag == "properties":  # the first shard's, less what it said of its own completion
            child = _without_completion(child)
            if not len(child):
                continue
        merged.append(child)  # <properties>, suite-level output: kept from the first shard
    properties = completion_properties(done)
    if properties:  # the merged run's completion (any shard's stop makes the merge incomplete)
        node = merged.find("properties")
        if node is None:
            node = ET.Element("properties")
            merged.insert(0, node)
        for name, value in properties:
            ET.SubElement(node, "property", name=name, value=value)
    cases = [[c for c in s if c.tag == "testcase"] for s in suites]
    for part, shard_cases in zip(parts, cases, strict=True):
        _point_at(shard_cases, part.directory, out)
    for i in range(max(len(c) for c in cases)):
        for shard_cases in cases:
            if i < len(shard_cases):
                merged.append(shard_cases[i])
    path = out / "junit.xml"
    text = ET.tostring(merged_root, encoding="unicode")
    path.write_text('<?xml version="1.0" encoding="utf-8"?>' + text, encoding="utf-8")
    return path


def merge_reports(
    paths: list[str | Path], out: str | Path, allow_incomplete: bool = False
) -> tuple[dict[str, Any], list[Path]]:
    """Merge shard reports into ``out``; returns (merged results.json data, written paths)."""
    if not paths:
        raise MergeError("no reports to merge")
    parts = sorted((_part(p) for p in paths), key=lambda p: p.index)
    _check_settings(parts)
    missing = _check_shards(parts, allow_incomplete)
    notes = _check_complete(parts, allow_incomplete)
    _check_cases(parts)
    out_dir = Path(out).resolve()
    _prepare_out(out_dir, parts)
    records = _gather_records(parts, out_dir)
    merged = _merged_results(parts, records, missing, notes)
    written = [write_results_file(out_dir, merged)]
    junit = _merge_junit(parts, out_dir, merged)
    if junit is not None:
        written.append(junit)
    from dmlconform.report.pages import write_reports

    written += write_reports(out_dir)
    return merged, written


def _check_cases(parts: list[Part]) -> None:
    """Refuse a case that two reports hold: they are not parts of one run."""
    owner: dict[str, Part] = {}
    for part in parts:
        for case in part.results.cases:
            if case.id in owner:
                raise MergeError(f"case {case.id} is in both {owner[case.id].label} and {part.label}")
            owner[case.id] = part


def _gather_records(parts: list[Part], out_dir: Path) -> list[dict[str, Any]]:
    """Every shard's case records in node id order, their reproducers copied into ``out_dir``
    and their replay commands pointed at the copies."""
    records: list[dict[str, Any]] = []
    for part in parts:
        shard_records = [dict(c.raw) for c in part.results.cases]
        _copy_reproducers(part, shard_records, out_dir)
        records += shard_records
    records.sort(key=lambda r: str(r.get("nodeid") or r.get("id")))
    return records


def _merged_results(
    parts: list[Part], records: list[dict[str, Any]], missing: list[str], notes: list[str]
) -> dict[str, Any]:
    """The merged results.json: the first shard's fields in its order, the per-run ones
    recomputed over all shards, and ``merged_from``."""
    datas = [p.results.data for p in parts]
    per_run = _per_run_fields(parts, records, missing, notes)
    merged: dict[str, Any] = {}
    for key, value in datas[0].items():
        merged[key] = per_run.pop(key) if key in per_run else value
    merged.update(per_run)  # fields an older first shard lacked
    merged["merged_from"] = _merged_from(parts)
    return merged


def _per_run_fields(
    parts: list[Part], records: list[dict[str, Any]], missing: list[str], notes: list[str]
) -> dict[str, Any]:
    datas = [p.results.data for p in parts]
    complete = not missing and not notes
    collected: int | None = None
    if not missing and all(isinstance(d.get("collected"), int) for d in datas):
        collected = sum(d["collected"] for d in datas)
    reasons = notes + ([f"shard(s) {', '.join(missing)} missing"] if missing else [])
    exit_codes = [d.get("exit_status") for d in datas if isinstance(d.get("exit_status"), int)]
    started = [str(d["started"]) for d in datas if d.get("started")]
    finished = [str(d["finished"]) for d in datas if d.get("finished")]
    durations = [float(d["duration_s"]) for d in datas if isinstance(d.get("duration_s"), int | float)]
    return {
        "command": unsharded_command(str(datas[0].get("command") or "")),
        "started": min(started) if started else None,
        "finished": max(finished) if finished else None,
        "duration_s": max(durations) if durations else None,  # the shards ran side by side
        "complete": complete,
        "status": "complete" if complete else "incomplete",
        "stop_reason": None if complete else "merged from an incomplete set: " + "; ".join(reasons),
        "exit_status": max(exit_codes) if exit_codes else None,
        "collected": collected,
        "ran": len(records),
        "deselected": sum(int(d.get("deselected") or 0) for d in datas),
        "shard": None,
        "summary": _summarize(records),
        "known_findings": finding_counts(records),
        "accuracy_classes": accuracy_classes(records),
        "cases": records,
        "coverage": _merge_coverage(parts),
    }


def _merged_from(parts: list[Part]) -> list[dict[str, Any]]:
    """One entry per shard; its versions only where they differ from the first shard's."""
    base_versions = parts[0].results.data.get("versions")
    return [
        {
            "report": str(part.directory),
            "shard": part.shard,
            "command": part.results.data.get("command"),
            "started": part.results.data.get("started"),
            "finished": part.results.data.get("finished"),
            "duration_s": part.results.data.get("duration_s"),
            "status": part.results.data.get("status", "complete"),
            **(
                {"versions": part.results.data.get("versions")}
                if part.results.data.get("versions") != base_versions
                else {}
            ),
        }
        for part in parts
    ]
