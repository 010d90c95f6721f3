"""Issue 10, "a newcomer's first hour": exports, build cache key, docs links, CLI options, the
terminal output, the candidate log cap and workers that die with their orchestrator."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbv.records import Status
from kbv.report_export import kernelbench_entry, write_eval_results_json
from kbv.store import Store
from verdict_factory import job_for, make_verdict

ROOT = Path(__file__).resolve().parents[1]


# KernelBench export --------------------------------------------------------------------------

def test_export_never_counts_a_hack_or_shortcut_as_correct(tmp_path):
    hack = make_verdict("HACK", problem_id=1, sample_id=0)
    shortcut = make_verdict("SHORTCUT", problem_id=1, sample_id=1)
    honest = make_verdict("PASS", problem_id=1, sample_id=2)
    wrong_hidden = make_verdict("INCORRECT", problem_id=1, sample_id=3, hidden_fail=("D4",))
    assert hack.nominal_passed and shortcut.nominal_passed and wrong_hidden.nominal_passed
    with Store(tmp_path / "s.db") as st:
        for v in (hack, shortcut, honest, wrong_hidden):
            st.put_verdict(job_for(v), v)
        write_eval_results_json(st, tmp_path / "er")
    folder = tmp_path / "er" / "model-a" / "level1"
    plain = {e["sample_id"]: e for e in json.loads((folder / "eval_results.json").read_text())["1"]}
    hidden = {e["sample_id"]: e for e in json.loads((folder / "eval_results_hidden.json").read_text())["1"]}
    assert {k: e["correctness"] for k, e in plain.items()} == {0: False, 1: False, 2: True, 3: True}
    assert {k: e["correctness"] for k, e in hidden.items()} == {0: False, 1: False, 2: True, 3: False}
    assert {k: e["kbv_status"] for k, e in plain.items()} == {0: "HACK", 1: "SHORTCUT", 2: "PASS", 3: "INCORRECT"}
    # what the original protocol alone would have said stays visible, under its own name
    assert {k: e["metadata"]["protocol_correctness"] for k, e in plain.items()} == {0: True, 1: True, 2: True, 3: True}
    assert hidden[3]["metadata"]["protocol_correctness"] is False
    # KernelBench's convention: no runtime for a sample that is not correct
    assert plain[0]["runtime"] == -1.0 and plain[1]["runtime"] == -1.0 and plain[2]["runtime"] > 0


def test_export_entry_of_every_status_has_kbv_status():
    for status in Status:
        if status is Status.EVAL_ERROR:
            continue  # not stored as a candidate verdict by the factory
        e = kernelbench_entry(make_verdict(status, nominal_fail=status is Status.INCORRECT), hidden=False)
        assert e["kbv_status"] == status.value == e["metadata"]["kbv_status"]
        assert e["correctness"] is (status is Status.PASS)


# Build cache key -----------------------------------------------------------------------------

def test_build_dir_key_changes_with_everything_that_changes_the_binary(tmp_path, monkeypatch):
    from kbv import candidates
    from kbv.records import CandidateRef

    monkeypatch.setenv("KBV_CACHE_DIR", str(tmp_path))
    cand = CandidateRef(path="/x/c.py", sha256="ab" * 32, backend="cpp")
    env = {"PATH": "/usr/bin"}
    base = candidates.build_dir(cand, "cpu", env)
    assert base == candidates.build_dir(cand, "cpu", dict(env)) and base.is_dir()
    assert base.parent == tmp_path / "build" and base.name.startswith("abab")
    others = {candidates.build_dir(cand, "cpu", {**env, var: "x"}) for var in ("CXX", "CC", "TORCH_CUDA_ARCH_LIST")}
    assert base not in others and len(others) == 3
    assert candidates.build_dir(cand, "cuda", env) != base
    for field, value in (("executable", "/other/venv/bin/python"), ("prefix", "/other/venv"),
                         ("python", "3.12.0"), ("torch", "2.99"), ("torch_cuda", "12.4"), ("kbv", "9.9")):
        real = candidates.build_key
        monkeypatch.setattr(candidates, "build_key", lambda d, e=None, f=field, v=value: {**real(d, e), f: v})
        assert candidates.build_dir(cand, "cpu", env) != base, field
        monkeypatch.setattr(candidates, "build_key", real)
    monkeypatch.setattr(candidates, "_tool_version", lambda tool: f"{tool}: other 1.0")
    assert candidates.build_dir(cand, "cpu", env) != base


def test_build_key_names_the_compiler_torch_and_python():
    import sys

    from kbv import __version__
    from kbv.candidates import build_key

    key = build_key("cpu", {"CXX": "no-such-compiler-kbv"})
    assert key["cxx"] == "absent" and key["env:CXX"] == "no-such-compiler-kbv"
    assert key["executable"] == sys.executable and key["prefix"] == sys.prefix and key["kbv"] == __version__
    assert key["torch"] and key["torch_cuda"]
    assert "nvcc" in build_key("cuda", {})


# Docs ----------------------------------------------------------------------------------------

#: files whose docstrings still name ``../shared`` and are being rewritten by their owners (issue 10
#: item 10 asks them to point at docs/hack-taxonomy.md and docs/kernelbench-format.md); drop when done.
_PENDING = {"src/kbv/metrics.py:3", "src/kbv/scan.py:4"}


def test_no_link_leaves_the_repository():
    """``../shared`` exists only beside the development checkout, not in a clone."""
    hits = []
    for sub in ("README.md", "docs", "src", "tests"):
        for p in [ROOT / sub] if (ROOT / sub).is_file() else (ROOT / sub).rglob("*"):
            if p.suffix in (".md", ".py", ".html", ".toml") and "egg-info" not in str(p) and p != Path(__file__):
                hits += [f"{p.relative_to(ROOT)}:{i}" for i, line in enumerate(p.read_text().splitlines(), 1)
                         if "../shared" in line]
    assert not set(hits) - _PENDING


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)\)", text)
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert targets and not missing


# Workers die with their orchestrator -------------------------------------------------------------

SLEEPER = """import subprocess
import time
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # a grandchild of the candidate worker, in its session: must die with the batch too
        self.child = subprocess.Popen(["sleep", "{token}"])

    def forward(self, x):
        time.sleep(0.5)  # a long job: the reference worker would go on verifying for minutes
        return x.relu()
"""


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                table[int(name)] = (int(fields[1]), fields[0].decode(), fields[19].decode())
            except (OSError, IndexError, ValueError):
                pass
    return table


def _descendants(root: int, table: dict) -> set[int]:
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        kids = {pid for pid, (ppid, _, _) in table.items() if ppid == p} - found
        found |= kids
        todo += kids
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_kill_9_of_kbv_run_leaves_no_worker(tmp_path):
    token = f"{300 + os.getpid() % 1000}.{time.time_ns() % 10**6}"  # a sleep nobody else runs
    probs = tmp_path / "problems" / "level1"
    probs.mkdir(parents=True)
    (probs / "1_A.py").write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.rand(8, 8)]\n\n"
        "def get_init_inputs():\n    return []\n")
    run = tmp_path / "runs" / "m"
    run.mkdir(parents=True)
    for s in range(3):
        (run / f"level_1_problem_1_sample_{s}_kernel.py").write_text(SLEEPER.format(token=token) + f"# {s}\n")
    env = {**os.environ, "KBV_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "kbv", "run", str(tmp_path / "problems"), str(tmp_path / "runs"),
                             "--store", str(tmp_path / "s.db"), "--device", "cpu", "--trials", "3"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        seen: dict[int, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            table = _proc_table()
            tree = _descendants(proc.pid, table)
            if any(token in _cmdline(p) for p in tree):  # mid-job: the candidate is loaded
                seen = {p: table[p][2] for p in tree}
                break
            time.sleep(0.05)
        assert seen, f"the candidate never started: {proc.stderr.read().decode()[-2000:] if proc.poll() is not None else 'timeout'}"
        # reference worker, its sentinel, the candidate worker and the candidate's child at least
        assert len(seen) >= 4, {p: _cmdline(p) for p in seen}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            table = _proc_table()
            left = {p for p, start in seen.items() if p in table and table[p][2] == start and table[p][1] != "Z"}
            if not left:
                break
            time.sleep(0.1)
        assert not left, {p: _cmdline(p) for p in left}
        assert not [p for p in table if token in _cmdline(p)]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.stderr.close()
