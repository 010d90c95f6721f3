"""The stages of one verification, in order, run in the trusted reference worker:
:mod:`.load` (preflight, static scan, candidate build), :mod:`.secret_shapes` (the candidate at a
secret shape, in a worker of its own), :mod:`.correctness` (input sets judged by :mod:`.judging`),
:mod:`.vetting_stage` (inline problem vetting), :mod:`.timing_rounds` (timed rounds and re-checks),
:mod:`.bound_pass`, :mod:`.repeat`, :mod:`.sync`, :mod:`.roofline` and :mod:`.profile_stage`
(timing-integrity checks), :mod:`.memory_stage`, :mod:`.verdict`; :mod:`.run` builds them over the
shared :mod:`.context` and calls them in order, once per declared workload (:mod:`.workload_runs`).
:mod:`.reference_worker` is the process that serves verification jobs."""
