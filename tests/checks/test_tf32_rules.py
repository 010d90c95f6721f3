"""kbv.checks.tf32_rules: which references the TF32 switches cannot change."""

from __future__ import annotations

import pytest

from kbv.checks.tf32_rules import tf32_inert, tf32_reachable


@pytest.mark.parametrize("op", ["aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten::convolution",
                                "aten._convolution", "aten.linalg_lu_factor_ex", "aten.addmv", "aten.dot",
                                "aten._scaled_dot_product_flash_attention", "aten._cdist_forward", "aten.outer",
                                "aten.cudnn_convolution", "aten._linalg_det", "aten.lstm"])
def test_gemm_conv_and_what_calls_them_are_reachable(op):
    assert tf32_reachable(op)


@pytest.mark.parametrize("op", ["aten.relu", "aten.gelu", "aten.softmax", "aten._softmax", "aten.sum", "aten.mul",
                                "aten.native_layer_norm", "aten.cumsum", "aten.max_pool2d_with_indices",
                                "aten.var_mean", "aten.exp", "aten._weight_norm", "aten.clamp_min"])
def test_elementwise_reductions_and_norms_are_not(op):
    assert not tf32_reachable(op)


def test_inert_only_when_every_count_succeeded_and_saw_no_reachable_op():
    relu = {"aten.relu": 1}
    assert tf32_inert({"dispatch": (relu, None), "profiler": (relu, None)})
    assert not tf32_inert({"dispatch": (relu, None), "profiler": ({"aten.relu": 1, "aten.addmm": 1}, None)})
    assert not tf32_inert({"dispatch": (relu, None), "profiler": ({}, "profiler failed")})  # a count failed
    assert not tf32_inert({"dispatch": ({}, None)})  # saw nothing: no evidence
    assert not tf32_inert({})
