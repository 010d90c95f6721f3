"""Everything the untrusted candidate worker imports: the wire protocol, the worker itself, its
confinement, the probes that run next to a candidate call, the timing loop, the numeric flags,
peak-memory and environment collectors. Nothing here may import a kbv package other than
:mod:`kbv.model` (tests/test_imports.py)."""
