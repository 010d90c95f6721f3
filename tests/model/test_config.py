"""kbv.model.config: a bad EvalConfig fails at construction, naming the field (before any worker starts)."""

from __future__ import annotations

import pytest

from kbv.model.config import EvalConfig


@pytest.mark.parametrize("kw, error, words", [
    ({"hidden": ("D9",)}, ValueError, "unknown hidden distribution"),
    ({"atol": -1.0}, ValueError, "atol and rtol"),
    ({"rtol": float("nan")}, ValueError, "atol and rtol"),
    ({"warmup": -1}, ValueError, "warmup"),
    ({"warmup": 2.5}, TypeError, "EvalConfig.warmup must be an int"),
    ({"trials": "x"}, TypeError, "EvalConfig.trials must be an int"),
    ({"trials": True}, TypeError, "EvalConfig.trials must be an int"),
    ({"atol": "1e-3"}, TypeError, "EvalConfig.atol must be a number"),
    ({"hidden": ["D1"]}, TypeError, "EvalConfig.hidden must be a tuple"),
    ({"call_timeout_s": 0}, ValueError, "call_timeout_s"),
    ({"trials": 0}, ValueError, "^trials must be >= 1, not 0$"),
    ({"timing_rounds": 0}, ValueError, "^timing_rounds must be >= 1"),
    ({"held_output_bytes": -1}, ValueError, "held_output_bytes"),
])
def test_a_bad_value_is_refused_at_construction(kw, error, words):
    with pytest.raises(error, match=words):
        EvalConfig(**kw)


def test_the_defaults_and_integer_tolerances_are_accepted():
    EvalConfig()
    assert EvalConfig(atol=0, rtol=0, warmup=0).atol == 0


def test_the_api_takes_lists_and_refuses_an_unknown_hidden_set_before_running():
    from kbv.api import make_config

    assert make_config({"hidden": ["D1", "D4"], "device": "cpu"}).hidden == ("D1", "D4")
    with pytest.raises(ValueError, match="unknown hidden"):
        make_config({"hidden": ["D9"], "device": "cpu"})


def test_ratio_text_keeps_two_significant_digits_below_a_tenth():
    from kbv.model.measurements import ratio_text

    assert [ratio_text(x) for x in (1.4321, 0.88, 0.1, 0.094, 0.0043, 0.0)] == ["1.43", "0.88", "0.10", "0.094",
                                                                                "0.0043", "0.00"]
