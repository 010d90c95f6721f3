"""A CUDA tool's run over one forward (kbv.processes.tool_run, kbv.sandbox.tool_target) on cpu, with
``sh`` standing in for the tool: the target's sandbox, its environment, its exit codes, its time
limit, and what it cannot reach."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

from kbv.processes.tool_run import namespace_wrapper, run_tool

pytestmark = pytest.mark.e2e  # each case starts a sandboxed target process

#: a tool that writes a one-line report to its log and runs the target (as compute-sanitizer does).
#: the target is the tool's child, not an exec of it, as under the real tools.
SH_TOOL = ["sh", "-c", 'echo "========= ERROR SUMMARY: 0 errors" > {log}; "$@"; exit $?', "tool"]


def _run(tmp_path, body: str, **kw):
    cand = tmp_path / "cand.py"
    cand.write_text("import os, signal, time, torch\nclass ModelNew(torch.nn.Module):\n"
                    "    def forward(self, x):\n" + "".join(f"        {line}\n" for line in body.splitlines())
                    + "        return torch.relu(x)\n")
    args = dict(device="cpu", build_dir=Path(tempfile.mkdtemp(dir=tmp_path)), module_path=str(cand),
                module_name="kbv_tool_test_cand", class_name="ModelNew", init_args=(), init_seed=42,
                precision="fp32", inputs=[torch.randn(4, 8)], calls=2, timeout_s=60)
    args.update(kw)
    return run_tool(SH_TOOL, **args)


def test_the_target_runs_every_call_and_the_report_comes_back(tmp_path):
    r = _run(tmp_path, "print('called', tuple(x.shape))")
    assert r.returncode == 0 and not r.timed_out and not r.target_raised
    assert r.report == "========= ERROR SUMMARY: 0 errors\n"
    assert r.target_output.count("called (4, 8)") == 2 and "kbv-tool-target: done" in r.target_output


def test_a_candidate_that_raises_exits_3_with_its_traceback(tmp_path):
    r = _run(tmp_path, "raise ValueError('mine')")
    assert r.target_raised and "ValueError: mine" in r.target_output


def test_nothing_of_kbvs_environment_reaches_the_target(tmp_path, monkeypatch):
    monkeypatch.setenv("KBV_TEST_SECRET_TOKEN", "s3cr3t-value")
    r = _run(tmp_path, "print('environ', open('/proc/self/environ', 'rb').read().count(b's3cr3t'), "
                       "'s3cr3t' in str(dict(os.environ)))")
    assert "environ 0 False" in r.target_output, r.target_output


def test_the_tools_settings_reach_the_target_through_its_sandbox(tmp_path):
    """``extra_env`` (PYTORCH_NO_CUDA_MEMORY_CACHING under compute-sanitizer) survives the sandbox's
    reset of the environment: without it every tensor sat inside the caching allocator's segments
    and memcheck saw no out-of-bounds read (the H200, 2026-12-05)."""
    r = _run(tmp_path, "print('caching', os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING'))",
             extra_env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert "caching 1" in r.target_output, r.target_output


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the target's own needs root")
def test_the_target_cannot_signal_the_tool_or_kbv(tmp_path):
    """At a uid of its own the target's kill() of its parent (the tool's host process) and of kbv's
    process does nothing: refused (another uid; no such pid in the tool's PID namespace) or, for the
    namespace's init, ignored. The tool's report survives and kbv lives."""
    body = (f"for p in (os.getppid(), {os.getpid()}):\n"
            "    try:\n        os.kill(p, signal.SIGKILL); print('killed', p)\n"
            "    except OSError as e:\n        print('refused', p, e.errno)")
    r = _run(tmp_path, body)
    assert r.own_uid and r.returncode == 0 and r.report == "========= ERROR SUMMARY: 0 errors\n", r
    assert r.target_output.count(f"refused {os.getpid()}") == 2, r.target_output
    assert "kbv-tool-target: done" in r.target_output


def test_a_run_past_its_time_is_killed_with_everything_it_started(tmp_path):
    # a duration no other process on the machine uses: a `sleep 300` of someone else's failed the
    # look for survivors below (a full-suite run beside a shell that polled with it)
    r = _run(tmp_path, "import subprocess; subprocess.Popen(['sleep', '317.25']); time.sleep(300)", timeout_s=5)
    assert r.timed_out and r.returncode is None and r.seconds < 30
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == b"sleep\x00317.25\x00"]


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


needs_wrapper = pytest.mark.skipif(not namespace_wrapper(), reason="the tool's namespaces need root, setpriv, unshare")


@needs_wrapper
def test_the_target_reaches_the_tools_abstract_socket_and_nothing_of_the_hosts(tmp_path):
    """The tools reach their target through abstract unix sockets (per network namespace): a target in
    a namespace of its own was never attached to (compute-sanitizer, ncu on the H200). The target
    shares the tool's namespace and still cannot reach a server on the host's loopback."""
    import socket
    import sys

    host = socket.create_server(("127.0.0.1", 0))
    port = host.getsockname()[1]
    listener = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind('\\0kbv-tool-test'); s.listen(1); "
                "print('listening', flush=True); c,_=s.accept(); c.sendall(b'hello-from-tool'); c.close()")
    tool = ["sh", "-c", f'{sys.executable} -c "{listener}" > {{log}} & sleep 1; exec "$@"', "tool"]
    body = ("import socket\nu = socket.socket(socket.AF_UNIX); u.connect('\\0kbv-tool-test')\n"
            "print('tool says', u.recv(64).decode())\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('host reached')\n"
            "except OSError as e:\n    print('host unreachable', e.errno)")
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                    + "".join(f"        {line}\n" for line in body.splitlines()) + "        return x\n")
    r = run_tool(tool, device="cpu", build_dir=Path(tempfile.mkdtemp(dir=tmp_path)), module_path=str(cand),
                 module_name="kbv_tool_test_sock", class_name="ModelNew", init_args=(), init_seed=42,
                 precision="fp32", inputs=[torch.randn(2)], calls=1, timeout_s=60)
    host.close()
    assert "tool says hello-from-tool" in r.target_output, r
    assert "host unreachable" in r.target_output and "host reached" not in r.target_output, r.target_output


@needs_wrapper
def test_a_killed_kbv_leaves_nothing_of_the_tool_run(tmp_path):
    """kbv killed with SIGKILL mid-run (no cleanup of its own): what the tool started in a session of
    its own (outside the tool's process group and the target's cgroup, as ncu's launcher is) dies
    too, with the PID namespace."""
    import subprocess
    import sys
    import time

    cand = tmp_path / "slow.py"
    cand.write_text("import time, torch\nclass ModelNew(torch.nn.Module):\n"
                    "    def forward(self, x):\n        time.sleep(300)\n        return x\n")
    drive = tmp_path / "drive.py"
    drive.write_text(
        "import sys, tempfile, torch\nfrom pathlib import Path\nfrom kbv.processes.tool_run import run_tool\n"
        "print('started', flush=True)\n"
        "run_tool(['sh', '-c', 'setsid sleep 778 & exec \"$@\"', 'tool'], device='cpu',"
        f" build_dir=Path(tempfile.mkdtemp(dir={str(tmp_path)!r})), module_path={str(cand)!r},"
        " module_name='kbv_tool_slow', class_name='ModelNew', init_args=(), init_seed=0, precision='fp32',"
        " inputs=[torch.ones(2)], calls=1, timeout_s=300)\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    p = subprocess.Popen([sys.executable, str(drive)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _pids(b"sleep\x00778\x00"):
        time.sleep(0.2)
    assert _pids(b"sleep\x00778\x00"), "the tool never started"
    p.kill()
    p.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_pids(b"sleep\x00778\x00") or _pids(b"kbv_tool_slow")):
        time.sleep(0.2)
    assert not _pids(b"sleep\x00778\x00")


def _pids(needle: bytes) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and needle in _cmdline(p)]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/run"), reason="the hiding mount needs root and /run")
def test_a_cpu_target_reaches_no_unix_socket_of_the_host_under_run(tmp_path):
    """Red team 2026-12-05: a root-owned 0600 pathname socket answered the target (a read-only mount
    does not stop ``connect()``, and CAP_DAC_OVERRIDE passes the mode). On cpu /run is an empty
    tmpfs in the candidate's mount namespace (the sandbox a candidate worker applies too)."""
    import socket
    import threading

    path = f"/run/kbv-test-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(1)
    server.settimeout(20)
    threading.Thread(target=lambda: _answer(server), daemon=True).start()
    try:
        r = _run(tmp_path, "import socket\nu = socket.socket(socket.AF_UNIX)\n"
                           f"try:\n    u.connect({path!r}); print('reached', u.recv(16))\n"
                           "except OSError as e:\n    print('refused', e.errno, sorted(os.listdir('/run')))")
    finally:
        server.close()
        os.unlink(path)
    assert "refused" in r.target_output and "reached" not in r.target_output, r.target_output
    assert "refused 2 []" in r.target_output, r.target_output  # ENOENT: /run is empty there


def _answer(server) -> None:
    try:
        conn, _ = server.accept()
        conn.sendall(b"host-secret")
        conn.close()
    except OSError:
        pass
