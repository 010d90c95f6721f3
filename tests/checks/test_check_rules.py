"""The rules that turn the pipeline's readings into findings (kbv.checks.syncpass, worker_calls,
output_rules, profile_rules, timing), called directly on made-up readings: which severity each
reading earns, and when a reading earns nothing."""

from __future__ import annotations

import signal

from kbv.checks import output_rules, profile_rules, syncpass, worker_calls
from kbv.checks import timing_rules as timing_rules
from kbv.model.records import Severity


def test_parent_wall_is_hack_only_when_the_re_measure_repeats_it_and_on_cpu_the_cpu_time_does():
    assert syncpass.wall_over(4.1, 1.0) and not syncpass.wall_over(4.0, 1.0)  # over 3 x 1 + 1 ms
    hack = syncpass.parent_wall(syncpass.ParentWall(0.01, 5.0, 5.0, "cuda"))
    assert hack.severity is Severity.HACK and hack.check == "timing:parent-wall"
    assert syncpass.parent_wall(syncpass.ParentWall(0.01, 5.0, 0.5, "cuda")).severity is Severity.WARNING
    # cpu: wall time waiting for a busy machine is no proof; CPU time over cores x 3 x the claim is
    assert syncpass.parent_wall(syncpass.ParentWall(0.07, 1.5, 1.5, "cpu", 0.05, 2)).severity is Severity.WARNING
    assert syncpass.parent_wall(syncpass.ParentWall(0.07, 1.5, 1.5, "cpu", None, 2)).severity is Severity.WARNING
    assert syncpass.parent_wall(syncpass.ParentWall(0.01, 5.0, 5.0, "cpu", 4.0, 2)).severity is Severity.HACK


def test_sync_gap_is_hack_only_on_a_gpu_of_its_own_when_every_measure_repeats_it():
    assert syncpass.sync_gap_over(0.06, 0.01) and not syncpass.sync_gap_over(0.04, 0.01)
    assert not syncpass.sync_gap_over(0.2, 0.3)  # under the candidate's own event time
    o = syncpass.SyncGap(1.0, 0.01, 0.03, 0.02, (0.97, 0.95, 0.96))
    assert syncpass.sync_gap_finding(o).severity is Severity.HACK
    shared = syncpass.SyncGap(1.0, 0.01, 0.03, 0.02, (0.97, 0.95, 0.96), other_gpu_processes=2)
    assert syncpass.sync_gap_finding(shared).severity is Severity.WARNING
    assert "(NVML)" in syncpass.sync_gap_finding(shared).detail
    counted = syncpass.SyncGap(1.0, 0.01, 0.03, 0.02, (0.97,), other_gpu_processes=2, share_source="proc")
    assert "/dev/nvidia" in syncpass.sync_gap_finding(counted).detail  # says who counted them
    once = syncpass.SyncGap(1.0, 0.01, 0.03, 0.02, (0.97, 0.01, 0.96))
    assert syncpass.sync_gap_finding(once).severity is Severity.WARNING


def test_worker_exits_and_broken_replies():
    assert worker_calls.early_exit(0, "time").severity is Severity.HACK
    assert worker_calls.early_exit(1, "time").severity is Severity.WARNING
    assert worker_calls.early_exit(-9, "time") is None and worker_calls.early_exit(None, "time") is None
    f = worker_calls.broken_reply("forward", "bad magic")
    assert f.severity is Severity.HACK and f.check == "probe:reply-channel" and "bad magic" in f.detail
    f = worker_calls.unjudged_dtype("load", "torch.quint8")  # the candidate's wrong answer, no cheat proven
    assert f.severity is Severity.WARNING and f.check == "probe:output-dtype" and f.taxonomy == ()
    assert f.detail.startswith("load: ") and "torch.quint8" in f.detail


def test_a_fault_handler_counts_only_when_installed_after_spawn():
    segv, bus = int(signal.SIGSEGV), int(signal.SIGBUS)
    assert worker_calls.fault_handlers({segv, int(signal.SIGINT)}, set()).severity is Severity.HACK
    assert worker_calls.fault_handlers({segv}, {segv}) is None
    assert "SIGBUS" in worker_calls.fault_handlers({segv, bus}, {segv}).detail
    assert worker_calls.fault_handlers({int(signal.SIGINT)}, set()) is None
    # faulthandler.enable()'s handlers by the worker's reading: a WARNING, never no finding
    told = worker_calls.fault_handlers({segv, bus}, set(), faulthandler=True)
    assert told.severity is Severity.WARNING and "faulthandler" in told.detail
    assert worker_calls.fault_handlers({int(signal.SIGINT)}, set(), faulthandler=True) is None
    # judged again at each reply: a WARNING once, then a HACK when another handler took faulthandler's place
    assert worker_calls.fault_handlers({segv, bus}, set(), faulthandler=True, reported="WARNING") is None
    assert worker_calls.fault_handlers({segv, bus}, set(), reported="WARNING").severity is Severity.HACK
    assert worker_calls.fault_handlers({segv, bus}, set(), reported="HACK") is None


def test_output_rules():
    assert output_rules.tensor_subclass_output(1, "Lazy").severity is Severity.HACK
    assert output_rules.proxy_outputs([]) is None and output_rules.proxy_outputs([0]).severity is Severity.HACK
    assert output_rules.repeated_output("a", "b", constant=False).severity is Severity.HACK
    assert output_rules.repeated_output("a", "b", constant=True).severity is Severity.WARNING
    # a fresh draw that gave a new output: the candidate's own symmetry, no cache (abs on D1 and D4)
    assert output_rules.repeated_output("D1", "D4", constant=False, fresh_repeats=False).severity is Severity.WARNING
    assert output_rules.not_repeatable("nominal-0").severity is Severity.WARNING
    assert output_rules.shape_mismatch("s", []) is None
    assert "(4,)" in output_rules.shape_mismatch("s", [((4,), (8,))]).detail
    assert output_rules.within_allclose("s", 1e-2, 1e-2, 0.5, 0.1).severity is Severity.WARNING
    assert "precision downgrade" in output_rules.within_allclose("s", 1e-2, 1e-2, 0.5, 0.1).detail
    # where the load found ModelNew's weights differ, that is the cause named (newcomer report: the
    # generic causes misled when the weights were wrong)
    weighted = output_rules.within_allclose("s", 1e-2, 1e-2, 0.5, 0.1, ["linear.weight"])
    assert "ModelNew's weights differ from Model's or match none of them: linear.weight; else precision" \
        in weighted.detail
    assert output_rules.reused_output("a parameter").severity is Severity.HACK
    assert output_rules.implausible_times_finding([0.0, -1.0]).check == "timing:non-positive"


def test_profile_rules():
    assert profile_rules.below_floor(60.0, 100.0, 60) is None
    assert profile_rules.below_floor(40.0, 100.0, 60).severity is Severity.WARNING
    assert profile_rules.refused_count("dispatch mode: boom").severity is Severity.SHORTCUT
    assert profile_rules.reference_ops(["aten::mm"], fallback=True).taxonomy == (15, 16)
    assert profile_rules.reference_ops(["aten::mm"], fallback=False).taxonomy == (15,)
    assert profile_rules.own_share(None) is None and profile_rules.own_share("0 % own").severity is Severity.SHORTCUT
    assert profile_rules.aten_registration([]) is None
    assert profile_rules.aten_registration(["aten::mm"]).severity is Severity.HACK
    assert profile_rules.unreadable_objects("nm failed").severity is Severity.SHORTCUT
    assert profile_rules.aten_kernels("mm (at::cpu::mm)", ["aten::mm"], True).severity is Severity.SHORTCUT
    partial = profile_rules.aten_kernels("mm (at::cpu::mm)", None, True)
    assert partial.severity is Severity.WARNING and "not every" in partial.detail
    assert "not every" not in profile_rules.aten_kernels("mm", None, False).detail


def test_roofline_and_repeat_gain_findings():
    assert timing_rules.roofline_suspect(0.4, 1.0, 1.0)
    assert not timing_rules.roofline_suspect(0.4, 0.9, 1.0)  # the reference itself beats the floor
    assert not timing_rules.roofline_suspect(0.6, 1.0, 1.0) and not timing_rules.roofline_suspect(0.1, None, 1.0)
    assert timing_rules.roofline_finding(0.4, 0.3, 1.0, 10, 10, 1e12).severity is Severity.HACK
    assert timing_rules.roofline_finding(0.4, 0.8, 1.0, 10, 10, 1e12).severity is Severity.WARNING
    assert timing_rules.repeat_gain_finding("x", True).severity is Severity.HACK
    assert timing_rules.repeat_gain_finding("x", False).severity is Severity.WARNING


def test_a_stopped_tree_that_ran_is_proof_only_when_every_try_of_one_block_ran():
    assert timing_rules.ran_while_paused([]) is None
    # two blocks each ran once, then timed quietly: a WARNING
    warn = timing_rules.ran_while_paused([[8.0], [12.0]])
    assert warn.severity is Severity.WARNING and warn.check == "timing:ran-while-paused"
    # three tries found it running, in one block or across blocks: the repeat confirms it
    assert timing_rules.ran_while_paused([[8.0], [8.0], [8.0]]).severity is Severity.HACK
    hack = timing_rules.ran_while_paused([[12.0, 8.0, 8.0]])
    assert hack.severity is Severity.HACK and hack.taxonomy == (2, 26)
    # blocks under the slack each, judged together: a core's worth over the baselines' wall
    short = timing_rules.ran_while_paused([], total_ms=(40.0, 60.0))
    assert short.severity is Severity.HACK
    assert timing_rules.ran_while_paused([], total_ms=(4.0, 60.0)) is None  # a tick or so: nothing
    assert timing_rules.ran_while_paused([], total_ms=(20.0, 400.0)) is None  # 5 % of the wall: nothing



def test_stopped_windows_after_calls_that_all_ran_are_proof():
    """Regression (red team row t02-run-while-paused, PASS 1 run in 3): the baselines' blocks of a
    fast problem are short, so a thread running through every stop stayed under both bars; windows of
    kbv's own right after a call, each over the slack, are proof; one quiet window is not."""
    from kbv.checks.timing_rules import PAUSED_CPU_SLACK_MS, ran_while_paused
    from kbv.model.records import Severity

    short_of_proof = ran_while_paused([], total_ms=(12.0, 12.4))
    assert short_of_proof is None
    ran = ran_while_paused([], total_ms=(12.0, 12.4), confirm=[(40.0, 50.2), (38.5, 50.1), (41.0, 50.3)])
    assert ran is not None and ran.severity is Severity.HACK and "stopped right after each of 3 calls" in ran.detail
    quiet_once = [(40.0, 50.2), (0.0, 50.1), (41.0, 50.3)]
    assert ran_while_paused([], total_ms=(12.0, 12.4), confirm=quiet_once) is None
    assert ran_while_paused([], total_ms=(12.0, 12.4), confirm=[(PAUSED_CPU_SLACK_MS, 50.0)] * 3) is None


def test_refusals_in_a_dead_workers_log_are_a_frame_walk():
    """A forged clock's ctypes callback whose frame read was refused killed its worker (SIGSEGV):
    the refusal, written to the worker's log as it happened, names the cheat (2026-12-06)."""
    from kbv.checks import worker_calls
    from kbv.sandbox.frame_watch import LOG_MARK

    log = f"noise\n{LOG_MARK}sys._getframe at /x/forge_clock.py:29\nTraceback (most recent call last):\n"
    found = worker_calls.refused_in_log(log)
    assert found.check == "probe:frame-walk" and found.severity is Severity.HACK and "forge_clock.py:29" in found.detail
    assert worker_calls.refused_in_log("Segmentation fault\n") is None
    assert worker_calls.refused_in_log("") is None


def test_candidate_processes_warns_with_the_pids_and_says_nothing_without_them():
    assert timing_rules.candidate_processes([]) is None
    f = timing_rules.candidate_processes([4242, 17])
    assert f.check == "probe:processes" and f.severity is Severity.WARNING
    assert "2 process(es)" in f.detail and "17, 4242" in f.detail


def test_outputs_equal_to_the_reference_skip_the_stale_memory_pass_and_others_keep_it(monkeypatch):
    """An output known to equal the reference cannot hold stale memory the reference does not
    (``poisoned_elements`` counts no element equal to it), so its pass is skipped (issue 21: one
    read fewer a set); an output not known equal still gets it and a poisoned one is HACK."""
    import types

    import torch

    from kbv.checks import probe_rules
    from kbv.sandbox.call_probes import POISON_INT32

    ref = [torch.ones(64)]
    out = torch.ones(64)
    out.view(torch.int32)[5] = POISON_INT32  # a stale-memory element
    reply = types.SimpleNamespace(tensors=[out], memory="", aliases=[], inputs_after=[], snapshot=[], late_work=0,
                                  new_threads=0)
    kw = dict(zero_strides=False, aliases_inputs=False, mutates_inputs=False)
    found = probe_rules.call_findings(reply, [out], [], ref, "nominal-0", **kw)
    assert [f.check for f in found] == ["probe:stale-memory"]
    calls = []
    monkeypatch.setattr(probe_rules, "poisoned_elements", lambda *a: calls.append(a) or 0)
    same = torch.ones(64)
    assert probe_rules.call_findings(reply, [same], [], ref, "nominal-0", equal_to_reference=True, **kw) == []
    assert calls == []
    probe_rules.call_findings(reply, [same], [], ref, "nominal-0", **kw)
    assert len(calls) == 1
