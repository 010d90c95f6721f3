"""The stages of one verification, in order, run in the trusted reference worker:
:mod:`.load` (preflight, static scan, candidate build), :mod:`.correctness` (input sets judged by
:mod:`.judging`), :mod:`.vetting` (inline problem vetting), :mod:`.timing` (timed rounds and
re-checks), :mod:`.sync`, :mod:`.roofline` and :mod:`.profile` (timing-integrity checks),
:mod:`.memory`, :mod:`.verdict`; :mod:`.run` chains them over the shared :mod:`.context`.
:mod:`.reference_worker` is the process that serves verification jobs."""
