"""The candidate worker's sandbox: no network (as root on Linux), a fresh working directory."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from conftest import problem
from kbv.candidates import load_candidate
from kbv.records import Status

NET_PROBE = '''
"""Returns the right answer only if it can NOT reach a listener on 127.0.0.1:{port}."""
import os, socket
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            return torch.zeros_like(x)  # network reachable: wrong on purpose
        except OSError:
            return torch.relu(x)
'''

CWD_PROBE = '''
"""Returns the right answer only if its working directory is a fresh, empty kbv temp dir."""
import os
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        here = os.getcwd()
        # a fresh temp dir (torch may create its own cache folders there, nothing of the caller's)
        ok = os.path.basename(here).startswith("kbv-cand-") and "pyproject.toml" not in os.listdir(here)
        ok = ok and "" not in __import__("sys").path and "KBV_CACHE_DIR" not in os.environ
        return torch.relu(x) if ok else torch.zeros_like(x)
'''


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="network isolation needs root on Linux")
def test_candidate_has_no_network(tmp_path, cpu_evaluator, fast_config):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        # reachable from here...
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        cand = tmp_path / "net_probe.py"
        cand.write_text(NET_PROBE.format(port=port))
        v = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(cand), fast_config)
    finally:
        listener.close()
    assert v.status is Status.PASS, v.message  # ...but not from the candidate worker
    assert any("network: isolated" in n for n in v.evidence["sandbox"])


def test_candidate_runs_in_a_fresh_directory_with_a_scrubbed_environment(tmp_path, cpu_evaluator, fast_config):
    cand = tmp_path / "cwd_probe.py"
    cand.write_text(CWD_PROBE.format())
    v = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(cand), fast_config)
    assert v.status is Status.PASS, v.message
