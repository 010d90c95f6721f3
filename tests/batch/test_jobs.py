"""Job keys and the hidden test file's hash in them (kbv.batch.jobs)."""

from __future__ import annotations

from kbv.batch.jobs import hidden_tests_changed, with_hidden_tests

SHA = "ab" * 32
OTHER = "cd" * 32


def test_a_job_planned_with_one_file_and_run_with_another_is_told_apart():
    planned = with_hidden_tests("cfg", SHA)
    assert not hidden_tests_changed(planned, SHA)
    assert hidden_tests_changed(planned, OTHER)
    assert not hidden_tests_changed(planned, None)  # no set was made: the file's error says so
    assert not hidden_tests_changed(with_hidden_tests("cfg", None), OTHER)  # planned without a file
