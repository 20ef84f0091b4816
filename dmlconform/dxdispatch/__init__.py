"""The DxDispatch bridge: run dmlconform's cases on real DirectML and judge what comes back.

- :mod:`.model`: operator descs <-> DxDispatch ``desc`` objects (spec-driven, strict both ways)
- :mod:`.modelfile`: a whole model file read strictly (the checker used by ``emulate`` and tests)
- :mod:`.buffers`: logical tensors <-> the strided, padded, zero-stride buffers DirectML reads
- :mod:`.bundle`: ``export``: cases -> bundle directory, manifest, run scripts (:mod:`.scripts`)
- :mod:`.check`: ``check``: DirectML's files -> the same verdicts and report as a run
- :mod:`.emulate`: ``emulate``: play DxDispatch locally on any backend (CI without Windows)

It reads cases like a run (``dmlconform.runner.cases``) and writes results like a run
(``dmlconform.runner.results``, ``dmlconform.report``); comparison is ``dmlconform.runner.checks``.
"""
