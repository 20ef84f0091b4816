"""DirectML operator conformance items.

This file holds no test functions: when pytest runs with ``--dml-backend``, the dmlconform plugin
(``dmlconform.runner.plugin``) collects this path as the conformance suite and generates its
``numeric[...]``, ``validation[...]`` and ``metamorphic[...]`` items from the spec. It lives
inside the package so that ``dmlconform run`` works from any directory.
"""
