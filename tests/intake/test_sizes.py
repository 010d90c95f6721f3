"""kbv.intake.sizes: a problem's size constants, read without running it, and the source resized."""

from __future__ import annotations

import pytest

from kbv.intake.sizes import size_constants, with_sizes

SOURCE = '''import torch
import torch.nn as nn

batch_size = 16
dim: int = 16384
in_f, out_f = 64, 32
total = batch_size * dim
unused = 999
lr = 0.5
twice = 3
twice = 4


class Model(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.lin = nn.Linear(a, b)

    def forward(self, x):
        return self.lin(x)


def get_inputs():
    return [torch.rand(total // in_f, in_f) * twice]


def get_init_inputs():
    return [in_f, out_f]
'''


def test_the_constants_get_inputs_and_get_init_inputs_read_directly_or_through_a_derived_name():
    assert size_constants(SOURCE) == {"batch_size": 16, "dim": 16384, "in_f": 64, "out_f": 32}


def test_with_sizes_replaces_the_literals_and_what_derives_from_them_follows():
    resized = with_sizes(SOURCE, {"dim": 8193, "out_f": 17})
    assert size_constants(resized) == {"batch_size": 16, "dim": 8193, "in_f": 64, "out_f": 17}
    namespace: dict = {}
    exec(compile(resized, "<resized>", "exec"), namespace)  # noqa: S102 - the test's own source
    assert namespace["total"] == 16 * 8193 and namespace["get_init_inputs"]() == [64, 17]
    with pytest.raises(KeyError, match="unused"):
        with_sizes(SOURCE, {"unused": 3})


def test_a_problem_with_literal_sizes_in_get_inputs_has_none():
    src = "import torch\n\ndef get_inputs():\n    return [torch.rand(16, 300)]\n\ndef get_init_inputs():\n    return []\n"
    assert size_constants(src) == {}


def test_workload_runs_counts_the_verifications_of_a_job_without_running_the_file():
    from kbv.intake.sizes import MAX_WORKLOADS, workload_runs

    base = "import torch\nn = 64\ndef get_inputs():\n    return [torch.randn(n)]\n"
    assert workload_runs(base) == 1
    assert workload_runs(base + 'KBV_METADATA = {"input_domains": {0: "positive"}}\n') == 1
    assert workload_runs(base + 'KBV_METADATA = {"workloads": {"a": {"n": 8}, "b": {"n": 9}}}\n') == 3
    # computed metadata: only the reference worker can count it, so the deadline allows the most
    assert workload_runs(base + 'KBV_METADATA = dict(workloads={"a": {"n": 8}})\n') == 1 + MAX_WORKLOADS
    assert workload_runs("def broken(:\n") == 1
