"""The text, markdown and JSON forms of a diff: grouped by operator, then level, each change with
its rule id and source, and its witness when it has one."""

from __future__ import annotations

import json
from typing import Any

from dmlconform.specdiff.changes import Change, DiffResult, Witness


def _fmt_counts(value: Any) -> str:
    if not value:
        return "none"
    v = list(value)
    if len(v) > 2 and v == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}..{v[-1]}"
    return ",".join(map(str, v))


def _fmt_rule(content: dict[str, Any] | None) -> str:
    if not content:
        return "-"
    params = " ".join(f"{k}={_short(v)}" for k, v in content.items() if k != "kind")
    return f"{content['kind']}({params})" if params else content["kind"]


def _short(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ",".join(map(str, v)) + "]"
    return str(v)


def describe(c: Change) -> str:
    """One human sentence for a change (the text and markdown forms)."""
    k, b, a = c.kind, c.before, c.after
    if k == "operator-added":
        return f"{c.subject} becomes available (introduced at {a['introduced']})"
    if k == "operator-removed":
        return f"{c.subject} is not available (introduced at {b['introduced']})"
    if k == "support-dimension-counts":
        return f"{c.subject} dimension counts {_fmt_counts(b)} -> {_fmt_counts(a)}"
    if k == "support-data-types":
        return f"{c.subject} data types {', '.join(b or []) or 'none'} -> {', '.join(a or []) or 'none'}"
    if k == "rule-on":
        return f"rule {c.subject} applies: {_fmt_rule(a)}"
    if k == "rule-off":
        return f"rule {c.subject} no longer applies: {_fmt_rule(b)}"
    if k == "rule-changed":
        return f"rule {c.subject} changes: {_fmt_rule(b)} -> {_fmt_rule(a)}"
    if k == "rule-renamed":
        return f"rule renamed {c.subject}: {_fmt_rule(a)}"
    if k == "activation-added":
        return f"{c.subject} can be fused"
    if k == "activation-removed":
        return f"{c.subject} can no longer be fused"
    if k == "activation-changed":
        return f"{c.subject} changes: {b} -> {a}"
    if k == "tensor-limit":
        return f"{c.subject} {b} -> {a}"
    if k.startswith("doc-note-"):
        return f"doc note {c.subject}: {(b or {}).get('choice', '-')} -> {(a or {}).get('choice', '-')}"
    return f"{c.subject}: {b} -> {a}"


def _header(result: DiffResult) -> str:
    if result.mode == "levels":
        return f"spec-diff DML_FEATURE_LEVEL_{result.from_} -> DML_FEATURE_LEVEL_{result.to}"
    at = f" at DML_FEATURE_LEVEL_{result.level}" if result.level else " (all levels)"
    return f"spec-diff {result.from_} -> {result.to}{at}"


def render_text(result: DiffResult) -> str:
    """Grouped by operator, then level; one line per change with its rule id and source."""
    lines = [_header(result), ""]
    if result.common:
        lines.append("(all operators)")
        lines += [f"  {c.level:<10} {c.kind:<26} {describe(c)}" for c in result.common]
        lines.append("")
    for name, changes in result.operators.items():
        lines.append(name)
        if not changes:
            lines += ["  no changes", ""]
            continue
        level = None
        for c in changes:
            if c.level != level:
                level = c.level
                lines.append(f"  at {level}:" if level != "*" else "  any level:")
            cite = f"[{c.rule}]" if c.rule else ""
            src = f" {c.source}" if c.source else ""
            lines.append(f"    {c.kind:<26} {describe(c)}   {cite}{src}".rstrip())
            if c.witness is not None:
                lines += ["      " + x for x in _witness_text(c.witness)]
        lines.append("")
    total = sum(len(v) for v in result.operators.values()) + len(result.common)
    lines.append(f"{total} change(s) in {sum(1 for v in result.operators.values() if v)} operator(s)")
    return "\n".join(lines) + "\n"


def _witness_text(w: Witness) -> list[str]:
    if w.desc is None:
        return [f"witness: none ({w.reason})"]
    also = {True: " (and across the whole range)", False: " (not across the whole range)"}.get(
        w.across_range, ""
    )
    out = [f"witness: legal at {w.legal_at}, illegal at {w.illegal_at}{also}:"]
    out += ["  " + v for v in w.violations]
    out += ["  " + line for line in w.desc.to_yaml().rstrip().splitlines()]
    return out


def render_markdown(result: DiffResult) -> str:
    lines = [f"# {_header(result)}", ""]
    sections = ([("(all operators)", result.common)] if result.common else []) + list(
        result.operators.items()
    )
    for name, changes in sections:
        lines += [f"## {name}", ""]
        if not changes:
            lines += ["No changes.", ""]
            continue
        lines += ["| level | kind | change | rule | source |", "|---|---|---|---|---|"]
        for c in changes:
            cells = [c.level, c.kind, describe(c), f"`{c.rule}`" if c.rule else "", c.source]
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        lines.append("")
        for c in changes:
            w = c.witness
            if w is None:
                continue
            lines.append(f"<details><summary>{c.level} {c.kind} {c.subject}: witness</summary>\n")
            if w.desc is None:
                lines.append(f"None: {w.reason}.")
            else:
                lines.append(f"Legal at {w.legal_at}, illegal at {w.illegal_at}:\n")
                lines += [f"- `{v}`" for v in w.violations]
                lines += ["", "```yaml", w.desc.to_yaml().rstrip(), "```"]
            lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def render_json(result: DiffResult) -> str:
    return json.dumps(result.to_json(), indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
