"""Spec and validation: the spec model, descs, rules, the validator, semantics, lint and diff."""
