"""The JSON shape of ``spec-diff --format json``, apart from the renderers: the docs name it and
the tests hold the output to it, so neither the docs nor the output can drift from the other."""

from __future__ import annotations

from typing import Any

from dmlconform.specdiff.changes import KINDS

# The documented JSON shape (docs/spec-tools.md, "spec-diff"); tests validate the output against it.
JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "from", "to", "operators"],
    "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["levels", "specs"]},
        "from": {"type": "string"},
        "to": {"type": "string"},
        "level": {"type": ["string", "null"]},
        "operators": {
            "type": "object",
            "additionalProperties": {"$ref": "#/$defs/changes"},
        },
        "common": {"$ref": "#/$defs/changes"},
    },
    "$defs": {
        "changes": {
            "type": "object",
            "required": ["changes"],
            "additionalProperties": False,
            "properties": {"changes": {"type": "array", "items": {"$ref": "#/$defs/change"}}},
        },
        "change": {
            "type": "object",
            "required": ["level", "kind", "subject", "before", "after", "rule", "source"],
            "additionalProperties": False,
            "properties": {
                "level": {"type": "string", "pattern": r"^(\*|[1-9]_[0-9](\.\.[1-9]_[0-9])?)$"},
                "kind": {"enum": list(KINDS)},
                "subject": {"type": "string"},
                "before": {},
                "after": {},
                "rule": {"type": ["string", "null"]},
                "source": {"type": "string"},
                "witness": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": [
                                "found",
                                "legal_at",
                                "illegal_at",
                                "violations",
                                "across_range",
                                "desc",
                            ],
                            "additionalProperties": False,
                            "properties": {
                                "found": {"const": True},
                                "legal_at": {"type": "string"},
                                "illegal_at": {"type": "string"},
                                "violations": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                                "across_range": {"type": ["boolean", "null"]},
                                "desc": {"type": "object", "required": ["type", "desc"]},
                            },
                        },
                        {
                            "type": "object",
                            "required": ["found", "reason", "tried"],
                            "additionalProperties": False,
                            "properties": {
                                "found": {"const": False},
                                "reason": {"type": "string"},
                                "tried": {"type": "integer"},
                            },
                        },
                    ]
                },
            },
        },
    },
}
