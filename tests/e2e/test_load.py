"""Honest verifications under load (issue 9): verdicts must not depend on how busy the machine is.

Four honest CPU verifications run at once, each in its own ``Evaluator`` (its own reference
worker and candidate workers, so four verifications really compete), beside a load generator
that keeps both cores busy and allocates and touches ~2 GiB of memory in a loop. On a GPU host
with 8 evaluations sharing the machine, honest GELU kernels were HACK by ``timing:sync-gap``; the
timing findings that accuse are now re-measured and a gap that does not repeat is a WARNING. The
contract here: no HACK finding and the status each candidate gets alone (PASS: each is a torch
reformulation that must pass, see tests/e2e/test_honest.py).

Marked ``slow``: about 3 minutes on a shared 2-core machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from kbv.model.records import EvalConfig, Severity, Status
from test_honest import describe, honest_candidate, honest_problem

#: (candidate, problem, expected status): small problems with honest candidates of the honest suite
CASES = [
    ("relu_clamp_min_torch.py", "level1/1_Small_ReLU.py", Status.PASS),
    ("softmax_exp_torch.py", "level1/5_Small_Softmax.py", Status.PASS),
    ("gelu_erf_torch.py", "level1/20_GELU.py", Status.PASS),
    ("mean_sum_div_torch.py", "level1/28_Mean_dim.py", Status.PASS),
]

#: A CPU and memory load: two forked processes spinning, and the parent allocating ~2 GiB,
#: writing every byte, freeing it, again, until killed. It prints "ready" once all three run.
LOAD_GENERATOR = r"""
import os, sys, time
import numpy as np
for _ in range(2):
    if os.fork() == 0:
        x = 0
        while True:
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
block = 2 << 30
first = True
while True:
    a = np.empty(block, dtype=np.uint8)
    a.fill(1)
    if first:
        print("ready", flush=True)
        first = False
    del a
    time.sleep(0.1)
"""


@pytest.fixture
def load_generator():
    """The load generator in its own process group (the forked spinners with it), killed after."""
    proc = subprocess.Popen([sys.executable, "-c", LOAD_GENERATOR], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"load generator did not start: {line!r}, rc={proc.poll()}"
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_four_honest_verifications_beside_a_load_generator(load_generator):
    from kbv.batch.evaluator import Evaluator

    cfg = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=240)
    verdicts: dict[int, object] = {}
    errors: dict[int, BaseException] = {}

    def run(k: int, cand: str, prob: str) -> None:
        try:
            with Evaluator("cpu") as ev:
                verdicts[k] = ev.evaluate(honest_problem(prob), honest_candidate(cand), cfg)
        except BaseException as exc:  # noqa: BLE001 - reported below, with the case
            errors[k] = exc

    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(k, c, p), daemon=True) for k, (c, p, _) in enumerate(CASES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    elapsed = time.perf_counter() - t0
    assert load_generator.poll() is None, "the load generator died before the verifications finished"
    print(f"4 concurrent verifications beside the load generator: {elapsed:.0f} s, "
          f"load average {os.getloadavg()[0]:.1f}")

    assert not errors, errors
    assert len(verdicts) == len(CASES), f"unfinished: {[c for k, (c, _, _) in enumerate(CASES) if k not in verdicts]}"
    problems = []
    for k, (cand, prob, expected) in enumerate(CASES):
        v = verdicts[k]
        report = describe(v)
        print(f"[{cand}@{prob}] {report}")
        hacks = [f for f in v.findings if f.severity is Severity.HACK]
        if hacks or v.status is not expected:
            problems.append(f"{cand}: expected {expected.value}, no HACK\n{report}")
    assert not problems, "\n".join(problems)
