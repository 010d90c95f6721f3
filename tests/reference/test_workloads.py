"""kbv.reference.workloads: a problem's declared workloads read from its KBV_METADATA (issue 23)."""

from __future__ import annotations

import pytest

from kbv.reference.workloads import MAX_WORKLOADS, WorkloadError, check_metadata_keys, declared_workloads

SOURCE = """
import torch
batch_size = 64
dim = 512
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_workloads_are_read_in_the_order_written():
    meta = {"workloads": {"wide": {"dim": 1536}, "tall": {"batch_size": 256, "dim": 256}}}
    assert list(declared_workloads(meta, SOURCE).items()) == [("wide", {"dim": 1536}),
                                                             ("tall", {"batch_size": 256, "dim": 256})]


def test_no_metadata_or_no_workloads_declares_none():
    assert declared_workloads(None, SOURCE) == {}
    assert declared_workloads({"input_domains": {0: "positive"}}, SOURCE) == {}


@pytest.mark.parametrize("workloads,fault", [
    ({"wide": {"width": 3}}, "'width' is not a size constant (size constants: batch_size, dim)"),
    ({"wide": {"dim": 0}}, "dim = 0; a size is an int in"),
    ({"wide": {"dim": 2.5}}, "dim = 2.5"),
    ({"wide": {"dim": True}}, "dim = True"),
    ({"nominal": {"dim": 8}}, "not 'nominal'"),
    ({"has space": {"dim": 8}}, "workload name 'has space'"),
    ({"wide": {}}, "a non-empty dict"),
    ({"same": {"dim": 512}}, "workload 'same' has the same sizes as 'nominal'"),
    ({"a": {"dim": 8}, "b": {"dim": 8}}, "workload 'b' has the same sizes as 'a'"),
    ([("wide", {"dim": 8})], "'workloads' must be a dict"),
    ({f"w{i}": {"dim": i + 1} for i in range(MAX_WORKLOADS + 1)}, f"at most {MAX_WORKLOADS}"),
])
def test_a_malformed_workload_is_one_clear_error(workloads, fault):
    with pytest.raises(WorkloadError) as err:
        declared_workloads({"workloads": workloads}, SOURCE)
    assert fault in str(err.value) and "\n" not in str(err.value)


def test_a_misspelt_metadata_key_is_an_error_not_ignored():
    with pytest.raises(WorkloadError, match="unknown key.*'workload'.*known: input_domains, workloads"):
        check_metadata_keys({"workload": {"wide": {"dim": 8}}})
    check_metadata_keys({"input_domains": {}, "workloads": {}})
    check_metadata_keys(None)
