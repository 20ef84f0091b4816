"""What changed between two feature levels, or between two spec revisions (``spec-diff``).

The diff is computed on views of one operator at one (spec, level) side (``views``); two views
are compared the same way whether they come from two levels of one spec or from one level of two
specs (``compare``), so both forms of the command share every line of logic. Each change may
carry a witness desc confirmed by the validator (``witness``, with its own constructive builder
in ``desc_builder``); ``render`` writes the text, markdown and JSON forms, whose JSON shape is
``json_schema``; ``model`` holds the result objects they all share.

Nothing here names an operator, a member or an activation: all of that comes from the spec.
"""
