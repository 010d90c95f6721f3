"""Detectors as pure functions: observations in (replies, input-set results, timings), findings
(:class:`kbv.model.records.Finding`) out. No process, no device, no I/O."""
