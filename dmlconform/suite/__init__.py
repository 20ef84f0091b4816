"""The conformance suite's anchor: ``test_conformance.py`` is collected by the dmlconform plugin."""
