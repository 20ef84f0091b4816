"""Minimal reproducers: shrink a failing case to the smallest desc and data that fail the same way.

``signature`` says what "the same way" means, ``moves`` lists the ways to make a case smaller,
``search`` runs them greedily against the backend, ``files`` reads and writes reproducer
directories (``dmlconform shrink``, ``dmlconform run --shrink``).
"""
