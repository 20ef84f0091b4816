"""Generation: legal and one-rule-broken descs, hypothesis strategies, input data.

A legal desc is built constructively, never generated and filtered: the rules of (operator,
level) made structure (``model``), every choice drawn into a plan (``plan``) from a chooser
(``chooser``), the plan realized with drawn tensor layouts (``realize``); ``legal`` and
``reductions`` are its seeded drivers, ``edges`` moves legal descs to their rules' edges. An
illegal desc is a legal base with overrides and one mutation (``breaker`` and the breakers of
each kind of rule), confirmed by the validator (``illegal``).
"""
