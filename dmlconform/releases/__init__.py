"""DirectML releases judged: the acceptance corpus, the agreement matrix, sweeps over releases,
the findings registry and the published conformance table. Above the runner: it runs cases."""
