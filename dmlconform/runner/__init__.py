"""Running conformance cases: collection (``cases``), expectations (``expect``), guarded backend
calls with timeouts and process isolation (``guard``, ``worker``) and the checks of one case
(``checks``). The pytest plugin and ``dmlconform replay`` are thin drivers over this package, so a
replayed case runs exactly the code that failed in the run."""
