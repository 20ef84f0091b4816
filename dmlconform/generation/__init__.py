"""Generation: legal and one-rule-broken descs, hypothesis strategies, input data.

A legal desc is built constructively, never generated and filtered: the rules of (operator,
level) made structure (``dmlconform.specification.structure_builder``), every choice drawn into
a plan (``plan``) from a chooser (``chooser``), the plan realized with drawn tensor layouts
(``realize``); ``legal`` and ``reductions`` are its seeded drivers, ``edges`` moves legal descs
to their rules' edges. An illegal desc is a legal base with the overrides and the change its
rule's kind asks for (each kind's breaker lives on its class in
``dmlconform.specification.rules``), confirmed by the validator (``illegal``).
"""
