"""The verdict message's list of failed input sets (kbv.pipeline.outcome.failed_sets_phrase)."""

from kbv.model.findings import NAMES_SHOWN
from kbv.pipeline.outcome import failed_sets_phrase


def test_one_failed_set_is_named_alone():
    assert failed_sets_phrase(["D4"], 18) == "D4"


def test_a_few_failed_sets_are_all_named_with_the_count():
    assert failed_sets_phrase(["D2", "D4"], 18) == "2 of 18 input sets (D2, D4)"


def test_many_failed_sets_name_the_first_and_last_and_count_them():
    names = [f"s{i}" for i in range(15)]
    text = failed_sets_phrase(names, 18)
    assert text.startswith("15 of 18 input sets (s0, s1, s2, ... s14;")
    assert all(f"s{i}" not in text.split("...")[0] for i in range(NAMES_SHOWN - 1, 14))
