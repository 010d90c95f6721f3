"""kbv run / report / baselines: the batch loop's failure handling (with a stand-in evaluator), the
commands' exit codes and messages, the baseline cache and KernelBench JSON, and the HTML report
rendered in headless Chromium."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbv.batch.baseline_cache import attach_compile_speedup, baseline_key, export_kernelbench_json
from kbv.batch.runner import BROKEN_PREFIX, plan_batch, run_batch
from kbv.cli.main import app
from kbv.batch.evaluator import EvaluationError
from kbv.intake.layout import LayoutError
from kbv.intake.problems import ProblemError
from kbv.model.records import EvalConfig, Measurement, Status
from kbv.batch.store import Store
from verdict_factory import ENV, job_for, make_batch, make_verdict

PROBLEM = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.rand(8, 8)]\n\n"
           "def get_init_inputs():\n    return []\n")
GOOD = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
CONFIG = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1)
runner = CliRunner()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path):
    """Three problems, run ``m`` with 2 good samples each for problems 1-2 and a broken file for 3."""
    probs = tmp_path / "problems" / "level1"
    for pid, name in ((1, "A"), (2, "B"), (3, "C")):
        write(probs / f"{pid}_{name}.py", PROBLEM + f"# problem {name}\n")
    runs = tmp_path / "runs"
    for pid in (1, 2):
        for s in (0, 1):
            write(runs / "m" / f"level_1_problem_{pid}_sample_{s}_kernel.py", GOOD + f"# {pid} {s}\n")
    write(runs / "m" / "level_1_problem_3_sample_0_kernel.py", "class ModelNew(:\n")
    return tmp_path / "problems", runs


class FakeEvaluator:
    """Stands in for :class:`kbv.batch.evaluator.Evaluator`: PASS, or the failure it is told to raise."""

    def __init__(self, fail: dict | None = None):
        self.fail = fail or {}
        self.calls: list[str] = []
        self.closed = False

    def evaluate(self, problem, candidate, config, *, hidden_tests=None):
        self.calls.append(candidate.path)
        exc = self.fail.get(Path(candidate.path).name) or self.fail.get(problem.name)
        if exc is not None:
            raise exc
        v = make_verdict("PASS", speedup=1.5)
        return dataclasses.replace(v, problem=problem, candidate=candidate, config=config)

    def close(self, abort=False):
        self.closed, self.aborted = True, abort


def test_batch_records_each_failure_kind_and_resumes(tree, tmp_path):
    problems, runs = tree
    plan = plan_batch(problems, [runs], CONFIG)
    assert len(plan.jobs) == 5 and plan.jobs[0].rejection  # the static rejection goes first
    broken = ProblemError(problems / "level1" / "2_B.py", "get_inputs() failed: RuntimeError: boom")
    ev = FakeEvaluator({"B": broken, "level_1_problem_1_sample_1_kernel.py": EvaluationError("worker died")})
    with Store(tmp_path / "s.db") as store:
        out = run_batch(plan, store, evaluator=ev)
        assert out.finished == 2 and out.rejected == 1  # 1 static COMPILE_ERROR + 1 PASS
        assert out.statuses == {"COMPILE_ERROR": 1, "PASS": 1}
        assert [p for p, _ in out.internal_errors] == [str(runs / "m" / "level_1_problem_1_sample_1_kernel.py")]
        assert out.excluded == {"level1/2_B": "get_inputs() failed: RuntimeError: boom"}
        assert out.skipped_excluded == 2  # B's second job was never sent
        assert sum("2_B" in c or "problem_2" in c for c in ev.calls) == 1
        (reason,) = store.exclusions()["level1/2_B"]
        assert reason.startswith(BROKEN_PREFIX) and "boom" in reason
        # the broken problem's jobs and the released job are pending, not stored as candidate failures
        assert store.progress().pending == 3 and store.progress().running == 0
        # rerun: B stays excluded while its file is unchanged; the released job runs again
        ev2 = FakeEvaluator()
        out2 = run_batch(plan, store, evaluator=ev2)
        assert out2.already_done == 2 and out2.finished == 1 and out2.skipped_excluded == 2
        assert len(ev2.calls) == 1
        # the problem file changes: new jobs supersede the old ones, the exclusion is dropped
        write(problems / "level1" / "2_B.py", PROBLEM + "# fixed\n")
        plan2 = plan_batch(problems, [runs], CONFIG)
        out3 = run_batch(plan2, store, evaluator=FakeEvaluator())
        assert out3.finished == 2 and out3.superseded == 2
        assert "level1/2_B" not in store.exclusions()
        assert store.progress().total == 5 == store.progress().done
        assert len(list(store.verdicts())) == 5


def test_interrupt_releases_the_job_in_flight(tree, tmp_path):
    problems, runs = tree
    plan = plan_batch(problems, [runs], CONFIG)
    ev = FakeEvaluator({"level_1_problem_2_sample_0_kernel.py": KeyboardInterrupt()})
    with Store(tmp_path / "s.db") as store:
        out = run_batch(plan, store, evaluator=ev)
        assert out.interrupted and ev.closed and ev.aborted  # not after the job in flight
        assert out.finished == 3  # the static rejection and problem 1's two samples
        p = store.progress()
        assert p.running == 0 and p.pending == 2 and p.done == 3


def test_cli_run_static_rejections_rerun_and_config_mismatch(tree, tmp_path):
    problems, runs = tree
    db = tmp_path / "s.db"
    # only the broken sample is selected: a COMPILE_ERROR verdict, no worker started
    args = ["run", str(problems), str(runs), "--store", str(db), "--device", "cpu", "--problem-ids", "3",
            "--trials", "6"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "COMPILE_ERROR" in r.output and "1/1 jobs have a verdict" in r.output
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and "0 verdict(s) written now, 1 were done before" in r.output
    r = runner.invoke(app, args[:-1] + ["7"])
    assert r.exit_code == 2 and "another configuration" in r.output and "trials 6 -> 7" in r.output
    r = runner.invoke(app, ["run", str(problems), str(runs), "--store", str(db), "--device", "cpu",
                            "--runs", "nobody"])
    assert r.exit_code == 2 and "--runs nobody: no such run" in r.output and "runs found: m" in r.output, r.output
    r = runner.invoke(app, ["run", str(problems), str(tmp_path / "nowhere"), "--store", str(db), "--device", "cpu"])
    # one line naming the folder, what is wrong and where (a newcomer's report: the problems' error said
    # "no such file or folder" with the path, this one neither)
    assert r.exit_code == 2 and "'" + str(tmp_path / "nowhere") + "': no such folder" in r.output, r.output
    r = runner.invoke(app, ["run", str(problems), str(runs), "--store", str(db), "--problem-ids", "x"])
    assert r.exit_code == 2 and "--problem-ids" in r.output


def test_cli_report_lists_a_broken_problem_file(tree, tmp_path):
    problems, runs = tree
    write(problems / "level1" / "4_Broken.py", "def get_inputs(:\n")
    write(runs / "m" / "level_1_problem_4_sample_0_kernel.py", GOOD)
    db = tmp_path / "s.db"
    r = runner.invoke(app, ["run", str(problems), str(runs), "--store", str(db), "--device", "cpu",
                            "--problem-ids", "3,4"])
    assert r.exit_code == 0, r.output
    flat = "".join(r.output.split())  # rich wraps long paths
    assert f"brokenproblemfile{problems / 'level1' / '4_Broken.py'}:" in flat, r.output
    assert "its1candidate(s)skipped" in flat and "noproblemfile" not in flat, r.output
    r = runner.invoke(app, ["report", "--store", str(db), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "level1/4_Broken" in md and "syntax error" in md
    assert (tmp_path / "rep" / "report.html").is_file()
    r = runner.invoke(app, ["report", "--store", str(tmp_path / "none.db"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "no such store" in r.output


def test_kernelbench_baseline_json_round_trip(tree, tmp_path):
    problems, _ = tree
    src = tmp_path / "results" / "timing" / "H100"
    doc = {"level1": {"1_A.py": {"mean": 1.25, "std": 0.01, "min": 1.2, "max": 1.3, "num_trials": 100,
                                 "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"},
                      "99_Missing.py": {"mean": 1.0}}}
    write(src / "baseline_time_torch.json", json.dumps(doc))
    write(src / "baseline_time_torch_compile_inductor_default.json", json.dumps({"level1": {"2_B.py": {
        "mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5, "num_trials": 10, "hardware": "NVIDIA H100 80GB HBM3",
        "device": "cuda:0"}}}))
    db, out = tmp_path / "s.db", tmp_path / "export"
    r = runner.invoke(app, ["baselines", str(problems), "--store", str(db), "--no-measure",
                            "--import-json", str(tmp_path / "results" / "timing"), "--export-json", str(out)])
    assert r.exit_code == 0, r.output
    assert "imported 2 baseline summaries" in r.output and "1 entries match no problem file" in r.output
    back = json.loads((out / "NVIDIA_H100_80GB_HBM3" / "baseline_time_torch.json").read_text())
    assert back == {"level1": {"1_A.py": doc["level1"]["1_A.py"]}}
    comp = json.loads((out / "NVIDIA_H100_80GB_HBM3" / "baseline_time_torch_compile_inductor_default.json").read_text())
    assert comp["level1"]["2_B.py"]["mean"] == 0.5
    # a measured baseline exports its statistics computed from the raw samples
    from kbv.intake.problems import load_problem

    p = load_problem(problems / "level1" / "3_C.py")
    with Store(db) as store:
        m = Measurement("eager-fp32-cudnn-tf32", "cuda", (1.0, 2.0, 3.0), warmup=5)
        store.put_baseline(baseline_key(p.sha256, ENV, "fp32", "eager-fp32-cudnn-tf32"), m)
        files = export_kernelbench_json(store, [p], tmp_path / "export2")
    (f,) = files
    assert f.parent.name == "NVIDIA_H200" and f.name == "baseline_time_torch.json"
    e = json.loads(f.read_text())["level1"]["3_C.py"]
    assert e == {"mean": 2.0, "std": m.std_ms, "min": 1.0, "max": 3.0, "num_trials": 3, "hardware": "NVIDIA H200",
                 "device": "cuda:0"}
    r = runner.invoke(app, ["baselines", str(problems), "--store", str(db), "--labels", "eager-fp64"])
    assert r.exit_code == 2 and "unknown eager-fp64" in r.output


def test_cached_compile_baseline_adds_a_speedup_only_where_it_matches(tmp_path):
    v = make_verdict("PASS", speedup=2.0, candidate_ms=1.0)
    hacked = make_verdict("INCORRECT", hidden_fail=["D4"], unverified_speedup=3.0, candidate_ms=1.0)
    with Store(tmp_path / "s.db") as store:
        assert attach_compile_speedup(v, store) is v  # nothing cached
        m = Measurement("compile", "cuda", (0.5, 0.5, 0.5), warmup=5)
        store.put_baseline(baseline_key(v.problem.sha256, ENV, "fp32", "compile"), m)
        got = attach_compile_speedup(v, store)
        assert got.speedup["compile"] == pytest.approx(0.5 / v.timing["candidate"].median_ms)
        assert got.evidence["compile_baseline"]["median_ms"] == 0.5
        assert "not side by side" in got.evidence["compile_baseline"]["source"]
        h = attach_compile_speedup(hacked, store)  # same problem: credited only as unverified
        assert "compile" not in h.speedup and "compile" in h.unverified_speedup
        other = dataclasses.replace(v, environment=dataclasses.replace(ENV, driver="999.0"))
        assert attach_compile_speedup(other, store) is other  # another driver: no match


@pytest.mark.slow
def test_kbv_baselines_measures_eager_and_compile_on_cpu_then_uses_the_cache(tree, tmp_path):
    problems, _ = tree
    db = tmp_path / "s.db"
    args = ["baselines", str(problems), "--store", str(db), "--device", "cpu", "--problem-ids", "1",
            "--trials", "6", "--warmup", "1"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "measured" in r.output
    with Store(db) as store:
        cached = {k.label: m for k, m in store.baselines()}
    assert set(cached) == {"eager-fp32", "eager-tf32", "compile"}
    assert all(m.trials == 6 and m.clock == "perf_counter" for m in cached.values())
    r = runner.invoke(app, args + ["--export-json", str(tmp_path / "out")])
    assert r.exit_code == 0 and "cached" in r.output
    assert len(list((tmp_path / "out").rglob("*.json"))) == 3


# The HTML report in a real browser ----------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 7000) -> Path:
    """Headless Chromium screenshot of a local file, with no network and no GPU."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--hide-scrollbars", "--no-first-run", f"--window-size={width},{height}",
           f"--screenshot={png}", html.as_uri()]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    return png


def _longest_run(row) -> int:
    best = cur = 0
    for v in row:
        cur = cur + 1 if v else 0
        best = max(best, cur)
    return best


def axes_frames(img) -> int:
    """Count the horizontal axis lines of matplotlib figures in a screenshot: rows holding an unbroken
    run of >= 250 near-black pixels (the page itself draws only light-grey rules), grouped into bands."""
    import numpy as np

    dark = np.all(img < 0.15, axis=-1)
    rows = [y for y in np.nonzero(dark.sum(axis=1) >= 250)[0] if _longest_run(dark[y]) >= 250]
    bands, last = 0, None
    for y in rows:
        if last is None or y - last > 20:
            bands += 1
        last = y
    return bands


#: appended to a copy of the page: once it has loaded, what Chromium made of each figure (decoded?
#: its pixel size, the size it is shown at, where it ends on the page) is written into the DOM.
_PROBE = """<script>window.addEventListener("load", function () {
  var plots = Array.prototype.map.call(document.querySelectorAll("img.plot"), function (img) {
    var r = img.getBoundingClientRect();
    return {alt: img.alt, complete: img.complete, w: img.naturalWidth, h: img.naturalHeight,
            shown_w: img.clientWidth, shown_h: img.clientHeight, bottom: r.bottom + window.scrollY};
  });
  var out = document.createElement("pre");
  out.id = "kbv-probe";
  out.textContent = JSON.stringify(plots);
  document.body.appendChild(out);
});</script>"""


def plots_in_chromium(html: Path, width: int = 1400) -> list[dict]:
    """Each ``img.plot`` of ``html`` as headless Chromium laid it out (``--dump-dom`` of a copy with
    :data:`_PROBE`): alt text, decoded or not, natural and shown size (px), bottom edge on the page."""
    import html as html_lib

    probe = html.with_name(html.stem + "-probe.html")
    probe.write_text(html.read_text().replace("</body>", _PROBE + "</body>"))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--no-first-run", f"--window-size={width},2000", "--dump-dom", probe.as_uri()]
    out = subprocess.run(cmd, check=True, timeout=120, capture_output=True, text=True).stdout
    found = re.search(r'<pre id="kbv-probe">(.*?)</pre>', out, re.S)
    assert found, f"the probe did not run: {out[-500:]}"
    return json.loads(html_lib.unescape(found.group(1)))


def _png_size(uri: str) -> tuple[int, int]:
    """(width, height) in px from a ``data:image/png;base64,`` URI's IHDR chunk."""
    import base64
    import struct

    data = base64.b64decode(uri.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_html_report_renders_every_plot_in_headless_chromium(tmp_path):
    """Every figure of the page decodes in a real browser, is shown at its own pixel size and draws
    its axes in colour. The screenshot is as tall as the figures reach (the page grew past the
    7,000 px window it once fitted: the last figure was cut and 11 of 12 frames counted)."""
    import numpy as np
    from matplotlib.image import imread

    from kbv.report.html import write_html

    with Store(tmp_path / "s.db") as store:
        for v in make_batch(seed=1):
            store.put_verdict(job_for(v), v)
        html = write_html(store, tmp_path / "report.html", title="kbv report (synthetic batch)")
    uris = re.findall(r'<img class="plot" alt="[^"]+" src="(data:image/png;base64,[^"]+)"', html.read_text())
    plots = plots_in_chromium(html)
    # six figures: decomposition (two axes side by side), failures, three memory-speedup scatters
    # (levels 1-3) and the speedup CDF
    assert [p["alt"] for p in plots] == ["decomposition bars", "failures per distribution",
                                         *(f"memory-speedup scatter, level {lv}" for lv in (1, 2, 3)), "speedup CDF"]
    for p, uri in zip(plots, uris):
        assert p["complete"] and (p["w"], p["h"]) == _png_size(uri), p  # decoded, whole
        assert (p["shown_w"], p["shown_h"]) == (p["w"], p["h"]), p  # not scaled: 1 px spines stay 1 px
    height = int(max(p["bottom"] for p in plots)) + 100
    img = imread(screenshot(html, tmp_path / "shot.png", height=height))[..., :3]
    assert img.shape == (height, 1400, 3)
    # every axes box has a top and a bottom spine (the two side-by-side axes share their rows)
    assert axes_frames(img) == 12
    # and they are drawn in colour: matplotlib's first series colour (tab:blue, #1f77b4) is there
    blue = np.all(np.abs(img - np.array([31, 119, 180]) / 255) < 0.02, axis=-1)
    assert blue.sum() > 5000


def test_hidden_test_files_reach_the_evaluator(tmp_path):
    """A hidden_tests/level1/1_hidden.py beside the problems is handed to the evaluator for problem 1."""
    from conftest import DATA
    from kbv.batch import runner as batch
    from kbv.model.records import EvalConfig

    runs = tmp_path / "runs" / "m"
    runs.mkdir(parents=True)
    (runs / "level_1_problem_1_sample_0_kernel.py").write_text((DATA / "candidates" / "relu_torch.py").read_text())
    config = EvalConfig(device="cpu")
    plan = batch.plan_batch(DATA / "problems", [tmp_path / "runs"], config,
                            hidden_tests_root=DATA / "hidden_tests")
    assert (1, 1) in plan.hidden_tests
    seen = {}

    class Recorder:
        def evaluate(self, problem, candidate, config, *, hidden_tests=None):
            seen[problem.problem_id] = hidden_tests
            raise RuntimeError("stop here")

    pj = next(pj for pj in plan.jobs if pj.problem.problem_id == 1)
    with pytest.raises(RuntimeError, match="stop here"):
        batch._verdict(pj, Recorder(), config, store=None, hidden_tests=plan.hidden_tests)
    assert seen[1] == str(DATA / "hidden_tests" / "level1" / "1_hidden.py")


def test_cli_run_hidden_tests_folder_that_gives_no_file_fails_naming_it(tree, tmp_path):
    """``--hidden-tests DIR`` that yields no hidden-test file for the selected problems exits 2 with
    one line naming DIR, instead of running the batch without them."""
    problems, runs = tree
    db = tmp_path / "s.db"
    base = ["run", str(problems), str(runs), "--store", str(db), "--device", "cpu", "--problem-ids", "3"]
    empty = tmp_path / "empty"
    empty.mkdir()
    other = write(tmp_path / "ht" / "level2" / "9_hidden.py", "def get_hidden_inputs():\n    return []\n").parents[1]
    for folder, says in ((tmp_path / "nowhere", "names no folder"), (empty, "holds no level<L>/<pid>_hidden.py"),
                         (other, "none for a selected problem")):
        r = runner.invoke(app, base + ["--hidden-tests", str(folder)])
        flat = " ".join(r.output.split())
        assert r.exit_code == 2 and says in flat and str(folder) in "".join(r.output.split()), r.output
    assert not db.exists() or "0 verdict" not in r.output


def test_hidden_tests_folder_under_any_name_is_read(tree, tmp_path):
    """A folder holding ``level<L>/<pid>_hidden.py`` directly counts whatever its name."""
    problems, runs = tree
    named = write(tmp_path / "secret_sets" / "level1" / "3_hidden.py",
                  "def get_hidden_inputs():\n    return []\n").parents[1]
    plan = plan_batch(problems, [runs], CONFIG, hidden_tests_root=named)
    assert plan.hidden_tests == {(1, 3): (named / "level1" / "3_hidden.py").resolve()}


def test_a_hidden_test_file_added_changed_or_broken(tree, tmp_path):
    """A broken hidden test file stops the batch before anything runs, naming the file and the fault;
    a file added or changed later supersedes its problem's verdicts, which run again with it
    (newcomer helper: a fixed file left the verdicts made without the tests)."""
    problems, runs = tree
    ht = tmp_path / "ht"
    write(ht / "level1" / "1_hidden.py", "def get_hidden_inputs(:\n")
    with pytest.raises(LayoutError, match=r"1_hidden\.py: syntax error at line 1"):
        plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht)
    write(ht / "level1" / "1_hidden.py", "def get_inputs():\n    return []\n")
    with pytest.raises(LayoutError, match=r"1_hidden\.py: not a hidden test file"):
        plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht)
    (ht / "level1" / "1_hidden.py").unlink()
    (ht / "level1" / "1_hidden.py").symlink_to(tmp_path / "gone.py")  # a dangling link is named, not skipped
    with pytest.raises(LayoutError, match=r"gone\.py: no such file"):
        plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht)
    (ht / "level1" / "1_hidden.py").unlink()
    plain = plan_batch(problems, [runs], CONFIG)
    with Store(tmp_path / "s.db") as store:
        assert run_batch(plain, store, evaluator=FakeEvaluator()).finished == 5
        write(ht / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return []\n")
        added = plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht)
        out = run_batch(added, store, evaluator=FakeEvaluator())
        assert out.superseded == 2 and out.finished == 2 and out.already_done == 3  # problem 1's two samples
        write(ht / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return [[]]\n")
        changed = plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht)
        assert run_batch(changed, store, evaluator=FakeEvaluator()).superseded == 2
        again = run_batch(plan_batch(problems, [runs], CONFIG, hidden_tests_root=ht), store, evaluator=FakeEvaluator())
        assert again.superseded == 0 and again.finished == 0 and again.already_done == 5


def test_a_rerun_without_the_hidden_tests_does_not_replace_verdicts_made_with_them(tree, tmp_path):
    """Resuming a store without the ``--hidden-tests`` it was run with is refused, naming the problems
    and the folder: it would supersede those verdicts with ones made without the tests (newcomer
    helper, sixteenth session); with the folder it resumes."""
    from kbv.batch.plan import ConfigMismatch
    from kbv.cli.common import make_config

    config = make_config("cpu", "fp32", None, 6, 1, None)  # what the command below resolves
    problems, runs = tree
    ht = tmp_path / "ht"
    write(ht / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return [[]]\n")
    with Store(tmp_path / "s.db") as store:
        assert run_batch(plan_batch(problems, [runs], config, hidden_tests_root=ht), store,
                         evaluator=FakeEvaluator()).finished == 5
        with pytest.raises(ConfigMismatch, match=r"hidden tests for 1 problem\(s\) \(level1/1\)"):
            run_batch(plan_batch(problems, [runs], config), store, evaluator=FakeEvaluator())
        again = run_batch(plan_batch(problems, [runs], config, hidden_tests_root=ht), store, evaluator=FakeEvaluator())
        assert again.superseded == 0 and again.already_done == 5  # nothing was removed by the refusal
        # another folder for problem 2 in a later run: each problem's folder is recorded (red-team
        # helper: one value, overwritten, named the wrong folder)
        other = tmp_path / "ht2"
        for pid in (1, 2):
            write(other / "level1" / f"{pid}_hidden.py", "def get_hidden_inputs():\n    return [[]]\n")
        assert run_batch(plan_batch(problems, [runs], config, hidden_tests_root=other), store,
                         evaluator=FakeEvaluator()).superseded == 2  # problem 2's samples, with tests now
        with pytest.raises(ConfigMismatch, match=re.escape(f"(level1/2) ") + r".*" + re.escape(f"({other.resolve()})")):
            run_batch(plan_batch(problems, [runs], config, hidden_tests_root=ht), store, evaluator=FakeEvaluator())
        # a file removed on purpose: the user says so
        out = run_batch(plan_batch(problems, [runs], config), store, evaluator=FakeEvaluator(),
                        allow_without_hidden_tests=True)
        assert out.superseded == 4 and out.finished == 4
        run_batch(plan_batch(problems, [runs], config, hidden_tests_root=ht), store, evaluator=FakeEvaluator())
    r = runner.invoke(app, ["run", str(problems), str(runs), "--store", str(tmp_path / "s.db"), "--device", "cpu",
                            "--trials", "6", "--warmup", "1"])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "holds verdicts made with hidden tests for 1 problem(s) (level1/1)" in flat, r.output
    assert f"give the same --hidden-tests ({ht.resolve()})" in flat and "--allow-without-hidden-tests" in flat, r.output
    # a statically rejected candidate's verdict needs no test: its slot does not count
    write(ht / "level1" / "3_hidden.py", "def get_hidden_inputs():\n    return [[]]\n")
    base = ["run", str(problems), str(runs), "--store", str(tmp_path / "r.db"), "--device", "cpu", "--problem-ids", "3"]
    assert runner.invoke(app, base + ["--hidden-tests", str(ht)]).exit_code == 0
    r = runner.invoke(app, base)
    assert r.exit_code == 0 and "holds verdicts made with hidden tests" not in r.output, r.output


def test_cli_run_names_the_selected_problems_a_hidden_tests_folder_does_not_cover(tmp_path):
    """Two problems, one hidden test file: the batch runs, and says which problem runs without (only
    static rejections here: no worker starts)."""
    for pid, name in ((1, "A"), (2, "B")):
        write(tmp_path / "problems" / "level1" / f"{pid}_{name}.py", PROBLEM)
        write(tmp_path / "runs" / "m" / f"level_1_problem_{pid}_sample_0_kernel.py", "class ModelNew(:\n")
    ht = write(tmp_path / "ht" / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return []\n").parents[1]
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 0 and "1 selected problem(s) have no hidden test file" in flat and "level1/2" in flat, r.output


def test_cli_run_names_hidden_test_files_that_match_no_problem(tmp_path):
    """Files of a ``--hidden-tests`` folder for no problem of the root (a misnamed file) are named,
    not passed over (fresh helper); an unselected problem's file is not, nor one of a level the root
    does not have (red-team helper: running one level named every other level's file)."""
    for pid, name in ((1, "A"), (2, "B")):
        write(tmp_path / "problems" / "level1" / f"{pid}_{name}.py", PROBLEM)
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", "class ModelNew(:\n")
    body = "def get_hidden_inputs():\n    return [[]]\n"
    for rel in ("level1/1_hidden.py", "level1/2_hidden.py", "level1/9_hidden.py", "level1/10_hidden.py",
                "level2/1_hidden.py", "level1/1_hidden_old.py"):
        write(tmp_path / "ht" / rel, body)
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--problem-ids", "1", "--hidden-tests", str(tmp_path / "ht")])
    flat = " ".join(r.output.split())
    assert r.exit_code == 0 and "3 file(s) in" in flat and "match no problem" in flat, r.output
    assert "9_hidden.py" in flat and "10_hidden.py" in flat and "2_hidden.py" not in flat, r.output
    assert "1_hidden_old.py" in flat and "not <pid>_hidden.py" in flat, r.output  # newcomer helper: passed over
    # another level's files, beside a root of one level, are usual (a whole hidden_tests folder): not named
    assert "level2" not in flat, r.output
    write(tmp_path / "ht" / "level2" / "x.py", body)  # nor its misnamed ones (red-team helper)
    write(tmp_path / "ht" / "level1" / "3_hidden.PY", body)  # a suffix in capitals is named
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--problem-ids", "1", "--hidden-tests", str(tmp_path / "ht")])
    flat = " ".join(r.output.split())
    assert r.exit_code == 0 and "4 file(s) in" in flat and "level2" not in flat, r.output
    # two files for one problem: which holds its tests is not guessed (red-team helper: one was kept)
    write(tmp_path / "ht" / "level_1" / "1_hidden.py", body)
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--problem-ids", "1", "--hidden-tests", str(tmp_path / "ht")])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "two hidden test files for level1/1" in flat, r.output


def test_a_hidden_test_file_edited_during_the_run_is_named_and_its_verdicts_rerun(tmp_path):
    """Sets made from other bytes than the job was planned with (the file edited mid-run): the
    verdict records it as ``hidden_tests_error``, ``kbv run`` exits 2 naming the file, and the next
    run supersedes the verdict (its key has the new bytes)."""
    import hashlib

    write(tmp_path / "problems" / "level1" / "1_A.py", PROBLEM)
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", GOOD)
    ht = write(tmp_path / "ht" / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return [[]]\n").parents[1]
    from kbv.cli.common import make_config

    config = make_config("cpu", "fp32", None, 6, 1, None)
    plan = plan_batch(tmp_path / "problems", [tmp_path / "runs"], config, hidden_tests_root=ht)
    edited = "def get_hidden_inputs():\n    return [[], []]\n"

    class Edited(FakeEvaluator):
        def evaluate(self, problem, candidate, config, *, hidden_tests=None):
            v = super().evaluate(problem, candidate, config, hidden_tests=hidden_tests)
            made = hashlib.sha256(edited.encode()).hexdigest()
            return dataclasses.replace(v, evidence={**v.evidence, "hidden_tests_sha256": made})

    db = tmp_path / "s.db"
    with Store(db) as store:
        assert run_batch(plan, store, evaluator=Edited()).finished == 1
        v = store.verdict(plan.jobs[0].job)
        assert "the file changed after the run was planned" in v.evidence["hidden_tests_error"], v.evidence
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(db),
                            "--device", "cpu", "--trials", "6", "--warmup", "1", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "the file changed after the run was planned" in flat and "1_hidden.py" in flat, r.output
    write(ht / "level1" / "1_hidden.py", edited)
    with Store(db) as store:
        again = run_batch(plan_batch(tmp_path / "problems", [tmp_path / "runs"], config, hidden_tests_root=ht), store,
                          evaluator=FakeEvaluator())
        assert again.superseded == 1 and again.finished == 1


def test_cli_run_exits_2_naming_a_hidden_test_file_that_failed_when_it_ran(tmp_path):
    """A hidden test file that parses but raises when called: its verdicts stand without its sets,
    and ``kbv run`` says so and exits 2, as ``kbv eval`` does (newcomer helper: exit 0 and PASS)."""
    write(tmp_path / "problems" / "level1" / "1_A.py", PROBLEM)
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", GOOD)
    ht = write(tmp_path / "ht" / "level1" / "1_hidden.py",
               "def get_hidden_inputs():\n    raise ValueError('boom')\n").parents[1]
    from kbv.cli.common import make_config

    config = make_config("cpu", "fp32", None, 6, 1, None)  # what the command below resolves
    plan = plan_batch(tmp_path / "problems", [tmp_path / "runs"], config, hidden_tests_root=ht)

    class Lacking(FakeEvaluator):
        def evaluate(self, problem, candidate, config, *, hidden_tests=None):
            v = super().evaluate(problem, candidate, config, hidden_tests=hidden_tests)
            return dataclasses.replace(v, evidence={**v.evidence, "hidden_tests_error": f"{hidden_tests}: boom"})

    db = tmp_path / "s.db"
    with Store(db) as store:
        assert run_batch(plan, store, evaluator=Lacking()).finished == 1
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(db),
                            "--device", "cpu", "--trials", "6", "--warmup", "1", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "hidden tests not checked on 1 verdict(s)" in flat and "boom" in flat, r.output


def test_cli_run_names_only_problems_it_runs_among_those_without_hidden_tests(tmp_path):
    """Three problems, a hidden test file for 1 and candidates for 1 and 2: problem 3, which no candidate
    targets, is not named as running without hidden tests (only static rejections: no worker starts)."""
    for pid, name in ((1, "A"), (2, "B"), (3, "C")):
        write(tmp_path / "problems" / "level1" / f"{pid}_{name}.py", PROBLEM)
    for pid in (1, 2):
        write(tmp_path / "runs" / "m" / f"level_1_problem_{pid}_sample_0_kernel.py", "class ModelNew(:\n")
    ht = write(tmp_path / "ht" / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return []\n").parents[1]
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 0 and "1 selected problem(s) have no hidden test file" in flat, r.output
    assert "level1/2" in flat and "level1/3" not in flat, r.output


@pytest.mark.parametrize("extra, said", [([], "no problem file (<id>_<Name>.py) found"),
                                         (["--problem-ids", "9"], "found that --level/--problem-ids select")])
def test_cli_run_on_a_folder_without_problems_says_so(tmp_path, extra, said):
    """An empty problem folder (or a selection that leaves none) is named as such, exit 2, not as
    candidates that match nothing."""
    (tmp_path / "problems").mkdir()
    if extra:
        write(tmp_path / "problems" / "level1" / "1_A.py", PROBLEM)
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", "class ModelNew(:\n")
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", *extra])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and said in flat and "nothing to run" not in flat, r.output


def test_cli_run_counts_only_the_hidden_test_files_of_problems_it_runs(tmp_path):
    """A hidden test file for a problem no candidate targets is not announced as checked; the
    problem that runs is named as running without one (red team)."""
    for pid, name in ((1, "A"), (3, "C")):
        write(tmp_path / "problems" / "level1" / f"{pid}_{name}.py", PROBLEM)
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", "class ModelNew(:\n")
    ht = write(tmp_path / "ht" / "level1" / "3_hidden.py", "def get_hidden_inputs():\n    return []\n").parents[1]
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 0 and "hidden test file(s) found" not in flat, r.output
    assert "1 selected problem(s) have no hidden test file" in flat and "level1/1" in flat, r.output


def test_cli_run_whose_candidates_all_target_broken_problems_says_so(tmp_path):
    write(tmp_path / "problems" / "level1" / "1_A.py", "import torch\nclass Model(:\n")
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", "class ModelNew(:\n")
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu"])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "every candidate's problem file is broken" in flat, r.output


def test_cli_run_on_an_empty_folder_with_hidden_tests_says_no_problem_file(tmp_path):
    (tmp_path / "problems").mkdir()
    write(tmp_path / "runs" / "m" / "level_1_problem_1_sample_0_kernel.py", "class ModelNew(:\n")
    ht = write(tmp_path / "ht" / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return []\n").parents[1]
    r = runner.invoke(app, ["run", str(tmp_path / "problems"), str(tmp_path / "runs"), "--store", str(tmp_path / "s.db"),
                            "--device", "cpu", "--hidden-tests", str(ht)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "no problem file (<id>_<Name>.py) found" in flat, r.output
