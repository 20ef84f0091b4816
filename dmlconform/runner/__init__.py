"""Running conformance cases: the run's options, selection and settings (``options``,
``selection``, ``settings``), collection and size tiers (``cases``, ``tiers``), expectations
(``expect``), the backend opened and guarded with timeouts and process isolation
(``backend_loading``, ``guard``, ``worker``), and the checks of one case (``checks``, ``judging``,
``relations``, ``error_record``). The pytest plugin and ``dmlconform replay`` are thin drivers
over this package, so a replayed case runs exactly the code that failed in the run."""
