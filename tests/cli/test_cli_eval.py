"""The kbv eval command as a user runs it: exit codes, one-line errors, the JSON record."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import DATA

PROBLEM = DATA / "problems" / "level1" / "1_Small_ReLU.py"


def kbv(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "kbv", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.e2e
def test_eval_writes_the_record_and_exits_zero_even_when_incorrect(tmp_path):
    out = tmp_path / "v.json"
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_wrong_shape.py", "--device", "cpu", "--trials", "3",
            "--json", out)
    assert r.returncode == 0, r.stderr
    assert "INCORRECT" in r.stdout
    rec = json.loads(out.read_text())
    for key in ("status", "input_sets", "timing", "speedup", "memory", "environment"):
        assert key in rec
    assert rec["status"] == "INCORRECT"
    assert {s["name"] for s in rec["input_sets"]} >= {"nominal-0", "D1", "D2", "D3", "D4"}
    for s in rec["input_sets"]:
        assert {"name", "passed", "max_abs_error", "dropped"} <= set(s)
    assert rec["environment"]["torch"] and rec["environment"]["kbv_version"]


@pytest.mark.e2e
def test_eval_pass_record_has_timing_and_speedups(tmp_path):
    out = tmp_path / "v.json"
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--trials", "3",
            "--json", out)
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert rec["status"] == "PASS"
    for label in ("candidate", "eager-fp32", "eager-tf32"):
        t = rec["timing"][label]
        assert t["median_ms"] > 0 and t["trials"] == 3 and t["iqr_ms"] >= 0 and len(t["times_ms"]) == 3
    assert set(rec["speedup"]) == {"eager-fp32", "eager-tf32"}


@pytest.mark.parametrize("content, fault", [
    (b"\xff\xfe\x00junk", "not UTF-8"),
    (b"import torch\nclass Model: pass\n", "missing get_inputs, get_init_inputs"),
    (b"def get_inputs(:\n", "syntax error at line 1"),
    (None, "no such file"),
])
def test_bad_problem_file_is_one_line_and_exit_2(tmp_path, content, fault):
    bad = tmp_path / "1_Bad.py"
    if content is not None:
        bad.write_bytes(content)
    r = kbv("eval", bad, DATA / "candidates" / "relu_torch.py", "--device", "cpu")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and fault in lines[0], r.stderr


def test_missing_model_new_is_one_line_and_exit_2(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n")
    r = kbv("eval", PROBLEM, cand, "--device", "cpu")
    assert r.returncode == 2
    assert r.stderr.strip() == f"kbv: error: candidate {cand}: no ModelNew defined at module level"  # which side


@pytest.mark.e2e
def test_problem_that_fails_at_import_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "1_Broken.py"
    bad.write_text("import torch\nraise ImportError('needs transformers')\n"
                   "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n")
    r = kbv("eval", bad, DATA / "candidates" / "relu_torch.py", "--device", "cpu")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "import failed: ImportError: needs transformers" in lines[0] and str(bad) in lines[0]


@pytest.mark.e2e
def test_a_problem_whose_get_inputs_raises_is_named_as_the_problem(tmp_path):
    """The fault found in the reference worker carries the ``problem`` prefix that a fault found
    reading the file does (newcomer)."""
    bad = tmp_path / "1_Raises.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                   "def get_inputs():\n    raise RuntimeError('no data')\ndef get_init_inputs():\n    return []\n")
    r = kbv("eval", bad, DATA / "candidates" / "relu_torch.py", "--device", "cpu")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"kbv: error: problem {bad}: get_inputs() failed: RuntimeError: no data"), lines


@pytest.mark.e2e
def test_cuda_requested_without_cuda_is_a_usage_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cuda")
    assert r.returncode == 2 and "CUDA is not available" in r.stderr
    # kbv run --gpus names the option the user gave, not one it implies
    r = kbv("run", PROBLEM.parent.parent, DATA / "candidates", "--gpus", "all", "--store", tmp_path / "s.db")
    assert r.returncode == 2 and "--gpus all: CUDA is not available" in r.stderr and "--device cuda" not in r.stderr, r.stderr


def test_json_path_that_is_a_directory_is_refused_before_running(tmp_path):
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--json", tmp_path)
    assert r.returncode == 2 and "is a directory" in r.stderr


def test_json_path_that_cannot_be_written_is_refused_before_running(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--json", blocker / "v.json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--json" in r.stderr and f"{blocker} is a file, not a folder" in r.stderr


def test_json_path_in_a_new_folder_says_it_makes_the_folder(tmp_path, monkeypatch):
    """A folder that does not exist is made, and said so on stderr (a typo in its name shows)."""
    from kbv.cli import common

    said = []
    monkeypatch.setattr(common.err_console, "print", lambda text, **kw: said.append(text))
    target = tmp_path / "new" / "deeper" / "v.json"
    common.writable_output(target, "--json")
    assert said == [f"kbv: note: --json made the folder {target.parent}"] and target.parent.is_dir()
    common.writable_output(target, "--json")  # the folder exists now: nothing said
    assert len(said) == 1


def test_a_folder_that_cannot_be_made_is_refused_without_a_note(tmp_path, monkeypatch):
    """Under /proc no folder can be made: one line, the fault, and no note that it was made (a
    newcomer's run printed "makes the folder /proc/x" before the refusal)."""
    import pytest
    from kbv.cli import common

    said = []
    monkeypatch.setattr(common.err_console, "print", lambda text, **kw: said.append(text))
    monkeypatch.setattr(common, "fail", lambda message: (_ for _ in ()).throw(SystemExit(message)))
    with pytest.raises(SystemExit) as exc:
        common.writable_output("/proc/kbv-no-such/v.json", "--json")
    assert "cannot be written" in str(exc.value) and said == []


def test_a_closed_stdout_ends_kbv_quietly_with_141():
    """Output piped into head: rich's console would end kbv with 1; kbv's says 141 (128 + SIGPIPE)."""
    code = "from kbv.cli.common import console\nfor _ in range(20000):\n    console.print('x' * 100)\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141 and b"Traceback" not in err, err


def test_a_store_that_is_no_database_is_one_line_and_exit_2(tmp_path):
    # newcomer report: these ended in a traceback of kbv's own error handler, exit 1
    not_db = tmp_path / "notes.db"
    not_db.write_text("not a database\n" * 100)
    for args in (("report", "--store", not_db, "--out", tmp_path / "r"),):
        r = kbv(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "cannot open it as a SQLite store" in r.stderr and str(not_db) in r.stderr


def test_kbvs_own_failure_is_one_line_and_exit_3(monkeypatch, capsys):
    # an error no command handles ends in one line and exit 3 (README: exit codes), not a traceback
    from kbv.cli import common

    def broken(*a, **k):
        raise RuntimeError("something inside kbv broke")

    monkeypatch.delenv("KBV_TRACEBACK", raising=False)
    monkeypatch.setattr(common.TyperGroup, "main", broken)
    with pytest.raises(SystemExit) as exc:
        common.Group(name="kbv").main([])
    assert exc.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: RuntimeError: something inside kbv broke" in err


@pytest.mark.e2e
def test_trials_is_exactly_the_number_of_timed_calls(tmp_path):
    out = tmp_path / "v.json"
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--trials", "5",
            "--json", out)
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert all(len(t["times_ms"]) == 5 for t in rec["timing"].values())


def test_help_never_cuts_words_at_100_columns():
    """Every command's ``-h`` fits a 100-column terminal without rich's ``…`` truncation (a fresh
    user could not read ``kbv run -h``'s layout and hidden-tests options)."""
    from typer.testing import CliRunner

    from kbv.cli.main import app

    commands = ["run", "eval", "demo", "report", "baselines", "generate", "refine", "audit", "vet", "dataset"]
    for name in commands:
        r = CliRunner().invoke(app, [name, "-h"], env={"COLUMNS": "100", "TERM": "xterm"})
        assert r.exit_code == 0, (name, r.output)
        assert "Usage" in r.output and "…" not in r.output, (name, [ln for ln in r.output.splitlines() if "…" in ln])


def test_the_command_list_reads_each_summary_as_one_paragraph_at_80_columns():
    """``kbv --help`` kept the docstrings' own line breaks, so each summary broke mid-line at 80
    columns ("...D1–D4 and kbv's secret" / "randomised distributions..."): every command list line
    now ends a summary or fills the panel's width (newcomer report)."""
    from typer.testing import CliRunner

    from kbv.cli.main import app

    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80", "TERM": "xterm"})
    assert r.exit_code == 0, r.output
    rows = [ln.strip("│ ").rstrip() for ln in r.output.splitlines() if ln.startswith("│")]
    panel = max(len(ln) for ln in r.output.splitlines())
    short = [ln for ln, nxt in zip(r.output.splitlines(), r.output.splitlines()[1:])
             if ln.startswith("│") and nxt.startswith("│            ") and len(ln.rstrip(" │")) < panel - 20]
    assert rows and not short, short


def test_demo_and_correctness_tables_keep_statuses_whole_at_80_columns():
    """At 80 columns the demo table showed "PA…" and "SHO…" and the correctness table "p…" (newcomer
    report): names wrap now, statuses and figures stay whole."""
    import dataclasses

    from rich.console import Console

    from kbv.console import print_verdict
    from kbv.demo import CASES, demo_table
    from verdict_factory import make_verdict

    rows = [(c, make_verdict("SHORTCUT" if i % 2 else "PASS", speedup=1.5)) for i, c in enumerate(CASES)]
    con = Console(width=80, record=True)
    con.print(demo_table(rows, "cpu"))
    text = con.export_text()
    assert "…" not in text and text.count("SHORTCUT") >= len(CASES) // 2, text
    v = make_verdict("PASS", speedup=1.5)
    con = Console(width=80, record=True)
    print_verdict(dataclasses.replace(v), con)
    text = con.export_text()
    assert "…" not in text, text


@pytest.mark.parametrize("args, says", [
    (["eval", PROBLEM, PROBLEM, "--device", "gpu"], "Invalid value for '--device': 'gpu' is not one of 'auto', 'cpu', 'cuda'"),
    (["eval", PROBLEM, PROBLEM, "--trials", "0"], "Invalid value for '--trials'"),
    (["eval"], "Missing argument 'problem'"),
    (["run", "a", "b", "--no-such-flag"], "No such option: --no-such-flag"),
    (["report", "--store"], "Option '--store' requires an argument"),
    (["no-such-command"], "No such command 'no-such-command'"),
])
def test_a_bad_option_value_is_one_line_and_exit_2(args, says):
    """``--device gpu`` printed typer's six-line framed box (issue 25): every usage error of every
    command is one line naming the option and the command's help, exit 2."""
    r = kbv(*args, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kbv: error: ") and says in lines[0], r.stderr
    assert "--help" in lines[0] and r.stdout == ""


def test_no_arguments_still_print_the_whole_help():
    r = kbv(timeout=120)
    assert r.returncode == 0 and "Usage: " in r.stdout and "eval" in r.stdout and r.stderr == ""


def test_a_flag_the_evaluation_raised_is_not_repeated_from_the_cached_vet_report(monkeypatch, capsys):
    """A newcomer's report: ``kbv eval`` on a stochastic problem printed its warning twice, once
    marked ``(kbv vet)``; a flag of another kind from the cached report is still added."""
    from types import SimpleNamespace

    from kbv.cli import verify
    from kbv.reference import vetting

    cached = SimpleNamespace(reasons=("stochastic: differs under two RNG states (vet's words)",
                                      "constant-output: the same output on every set"))
    monkeypatch.setattr(vetting, "cached_report", lambda pref, precision: cached)
    verdict = SimpleNamespace(problem_flags=("stochastic: two runs differ by 0.3",),
                              config=SimpleNamespace(precision="fp32"))
    lines = []
    monkeypatch.setattr(verify.err_console, "print", lambda text, **kw: lines.append(text))
    verify._warn_if_flagged(SimpleNamespace(path="p.py"), verdict)
    body = [ln.strip() for ln in lines[1:]]
    assert body == ["stochastic: two runs differ by 0.3", "constant-output: the same output on every set (kbv vet)"]


def test_secret_shapes_option_resolves_with_the_policy():
    """--secret-shapes N sets EvalConfig.secret_shapes; without it kbv runs one and kbv-compat none."""
    from kbv.cli.common import make_config

    assert make_config("cpu", "fp32", 1, 3, 1, None).secret_shapes == 1
    assert make_config("cpu", "fp32", 1, 3, 1, None, "kbv-compat").secret_shapes == 0
    assert make_config("cpu", "fp32", 1, 3, 1, None, "kbv", 0).secret_shapes == 0
    assert make_config("cpu", "fp32", 1, 3, 1, None, "kbv-compat", 2).secret_shapes == 2


def test_diagnostics_options_on_cpu_say_not_applicable_and_a_bad_tool_is_exit_2(tmp_path):
    """Issue 24 on cpu: ``kbv profile`` says so and exits 0; ``--sanitize`` with a name outside the
    tools is one line and exit 2 before anything runs."""
    r = kbv("profile", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu")
    assert r.returncode == 0 and "kbv profile: not applicable on cpu" in r.stderr, (r.stdout, r.stderr)
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--sanitize", "memcheck,leakcheck")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "kbv: error: --sanitize: unknown tool(s) 'leakcheck'; it takes a comma-separated list of memcheck, "
        "racecheck, initcheck, synccheck"]


@pytest.mark.e2e
def test_eval_with_diagnostics_on_cpu_runs_without_them(tmp_path):
    out = tmp_path / "v.json"
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--trials", "3",
            "--sanitize", "memcheck,racecheck", "--profile", "--json", out)
    assert r.returncode == 0, r.stderr
    assert "kbv: --sanitize: not applicable on cpu" in r.stderr and "kbv: --profile: not applicable on cpu" in r.stderr
    record = json.loads(out.read_text())  # what was asked is on the record, and that it did not apply
    assert record["status"] == "PASS" and record["config"]["sanitize"] == ["memcheck", "racecheck"]
    assert record["config"]["ncu_profile"] and "not applicable on cpu" in record["evidence"]["diagnostics"]


def test_eval_reads_the_hidden_test_file_beside_the_problem_or_the_one_given(tmp_path):
    """Newcomer 2026-12-05: ``kbv eval`` ignored ``hidden_tests/level1/1_hidden.py`` beside the
    problems, which ``kbv run`` reads. Found as kbv run finds it, or given; a folder without the
    problem's file exits 2 naming it."""
    import json

    fast = ("--device", "cpu", "--seeds", "1", "--trials", "3", "--warmup", "0", "--secret-shapes", "0")
    cand = DATA / "candidates" / "relu_torch.py"
    r = kbv("eval", PROBLEM, cand, *fast, "--json", tmp_path / "v.json")
    assert r.returncode == 0 and "hidden test file:" in r.stdout and "1_hidden.py" in r.stdout, (r.stdout, r.stderr)
    names = {s["name"] for s in json.loads((tmp_path / "v.json").read_text())["input_sets"]}
    assert {"HT1", "HT2", "HT3", "HT4"} <= names
    empty = tmp_path / "hidden_tests"
    empty.mkdir()
    r = kbv("eval", PROBLEM, cand, *fast, "--hidden-tests", empty)
    assert r.returncode == 2 and "holds no level1/1_hidden.py" in r.stderr and str(empty) in r.stderr, r.stderr
    # a broken hidden test file is said, not passed over (fresh helper, 2026-12-05)
    broken = tmp_path / "broken" / "level1"
    broken.mkdir(parents=True)
    (broken / "1_hidden.py").write_text("def get_hidden_inputs():\n    raise ValueError('boom')\n")
    r = kbv("eval", PROBLEM, cand, *fast, "--hidden-tests", broken.parent)
    # a bad input file: exit 2 with the file and the fault, the verdict without its sets printed
    # above (newcomer, 2026-12-05: a warning at the end with exit 0 was missed)
    assert r.returncode == 2 and "hidden tests not checked" in r.stderr and "boom" in r.stderr, r.stderr
    assert "1_hidden.py" in r.stderr and "PASS" in r.stdout, (r.stdout, r.stderr)
    # and the verdict's own line says it lacks them, as its JSON message does (newcomer, 2026-12-06:
    # a reader of the PASS line or the JSON saw a clean PASS)
    assert "(hidden tests not checked:" in next(ln for ln in r.stdout.splitlines() if "PASS" in ln), r.stdout
    # a file that does not parse, or defines no get_hidden_inputs, stops before anything runs
    # (newcomer, sixteenth session: the verdict's PASS line came first, the error at the end)
    syntax = tmp_path / "syntax" / "level1"
    syntax.mkdir(parents=True)
    for text, says in (("def get_hidden_inputs(:\n", "syntax error at line 1"),
                       ("def get_inputs():\n    return []\n", "defines no get_hidden_inputs()")):
        (syntax / "1_hidden.py").write_text(text)
        r = kbv("eval", PROBLEM, cand, *fast, "--hidden-tests", syntax.parent)
        assert r.returncode == 2 and says in r.stderr and "1_hidden.py" in r.stderr, r.stderr
        assert "PASS" not in r.stdout and "verifying" not in r.stdout, r.stdout
    # a problem outside a levelN folder: the folder cannot name its file
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / PROBLEM.name).write_text(PROBLEM.read_text())
    r = kbv("eval", flat / PROBLEM.name, cand, *fast, "--hidden-tests", broken.parent)
    assert r.returncode == 2 and "levelNone" not in r.stderr and "not a levelN/<id>_Name.py problem" in r.stderr, r.stderr


def test_eval_refuses_another_problems_hidden_test_file(tmp_path):
    """``kbv eval --hidden-tests FILE`` with the file of another problem (by its
    ``level<L>/<pid>_hidden.py`` name) exits 2 before anything runs (fresh helper: it was taken)."""
    cand = DATA / "candidates" / "relu_torch.py"
    other = tmp_path / "level1" / "2_hidden.py"
    other.parent.mkdir()
    other.write_text((DATA / "hidden_tests" / "level1" / "1_hidden.py").read_text())
    r = kbv("eval", PROBLEM, cand, "--device", "cpu", "--hidden-tests", other)
    assert r.returncode == 2 and "hidden test file of level1/2, not of" in r.stderr and str(other) in r.stderr, r.stderr
    assert "verifying" not in r.stdout, r.stdout
    level = tmp_path / "level3" / "1_hidden.py"  # the same id at another level
    level.parent.mkdir()
    level.write_text(other.read_text())
    r = kbv("eval", PROBLEM, cand, "--device", "cpu", "--hidden-tests", level)
    assert r.returncode == 2 and "level3/1, not of" in r.stderr, r.stderr
    for rel in ("level1/1_hidden.py", "level_1/1_hidden.py"):  # two files for problem 1: none is guessed
        (tmp_path / "two" / rel).parent.mkdir(parents=True)
        (tmp_path / "two" / rel).write_text(other.read_text())
    r = kbv("eval", PROBLEM, cand, "--device", "cpu", "--hidden-tests", tmp_path / "two")
    assert r.returncode == 2 and "two hidden test files for level1/1" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.e2e
def test_eval_exits_2_naming_a_hidden_set_the_reference_cannot_run(tmp_path):
    """A set of the user's hidden test file that the reference raises on (here one input too many)
    is the file's fault: the verdict stands on the other sets, and ``kbv eval`` names the set and
    exits 2 (fresh helper: it was dropped with exit 0)."""
    path = tmp_path / "level1" / "1_hidden.py"
    path.parent.mkdir()
    path.write_text("import torch\n\ndef get_hidden_inputs():\n"
                    "    return [[torch.randn(64, 64)], [torch.randn(64, 64), torch.randn(3)]]\n")
    r = kbv("eval", PROBLEM, DATA / "candidates" / "relu_torch.py", "--device", "cpu", "--seeds", "1",
            "--trials", "3", "--warmup", "0", "--secret-shapes", "0", "--hidden-tests", path,
            "--json", tmp_path / "v.json")
    assert r.returncode == 2 and "set HT2: reference raised TypeError" in r.stderr and str(path) in r.stderr, r.stderr
    sets = {s["name"]: s for s in json.loads((tmp_path / "v.json").read_text())["input_sets"]}
    assert sets["HT1"]["passed"] is True and sets["HT2"]["dropped"], sets


def test_a_cuda_candidate_that_fails_to_build_on_cpu_gets_a_note():
    """The toolchain's own error ("CUDA_HOME environment variable is not set") does not say the
    candidate needs a GPU (newcomer, 2026-12-05)."""
    from kbv.cli.verify import cuda_on_cpu_note

    assert "--device cuda" in cuda_on_cpu_note("COMPILE_ERROR", "cuda", "cpu")
    assert cuda_on_cpu_note("COMPILE_ERROR", "cpp", "cpu") is None
    assert cuda_on_cpu_note("COMPILE_ERROR", "cuda", "cuda") is None
    assert cuda_on_cpu_note("PASS", "cuda", "cpu") is None


def test_demo_case_line_keeps_the_whole_message_at_80_columns():
    """The demo's line per case was cut to the terminal ("forward ran the reference's own torch …",
    newcomer report): it wraps now, so the finding's point is there."""
    import dataclasses

    from rich.console import Console

    from kbv.demo import print_case_line
    from verdict_factory import make_verdict

    tail = "so the speed is torch's own, not the candidate's (taxonomy 15)"
    v = dataclasses.replace(make_verdict("SHORTCUT", speedup=1.0),
                            message="matmul_tf32.py: correct, but SHORTCUT probe:reference-ops: forward ran the "
                                    "reference's own torch ops aten.mm, " + tail)
    con = Console(width=80, record=True)
    print_case_line(v, con)
    text = con.export_text()
    assert "…" not in text and text.replace("\n", "").endswith(tail), text


@pytest.mark.e2e
def test_the_json_record_is_written_before_output_a_reader_may_close(tmp_path):
    """``kbv eval ... --json v.json | head -1`` wrote no record (newcomer report): the record is
    written as soon as the verdict exists, before anything is printed."""
    import shutil

    prob = tmp_path / "problems" / "level1" / PROBLEM.name  # no hidden test file beside it
    prob.parent.mkdir(parents=True)
    shutil.copy(PROBLEM, prob)
    out = tmp_path / "v.json"
    p = subprocess.Popen([sys.executable, "-m", "kbv", "eval", str(prob), str(DATA / "candidates" / "relu_torch.py"),
                          "--device", "cpu", "--trials", "3", "--json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    _, err = p.communicate(timeout=600)
    assert first.startswith(b"PASS"), (first, err)
    record = json.loads(out.read_text())
    assert record["status"] == "PASS"
    # the first line's speedup carries "~" exactly when its medians are noisy, and the record its interval
    noisy = any(record["timing"][k]["noisy"] for k in ("candidate", "eager-tf32"))
    assert (b"x ~ vs eager-tf32" in first) == noisy, (first, record["timing"])
    lo, hi = record["evidence"]["speedup_interval_95"]["eager-tf32"]
    assert 0 < lo <= hi


def test_json_over_an_input_file_is_refused_before_anything_runs(tmp_path):
    """``--json`` naming the candidate overwrote it with the record (helper report, seventh session)."""
    import shutil

    cand = tmp_path / "relu_torch.py"
    shutil.copy(DATA / "candidates" / "relu_torch.py", cand)
    before = cand.read_text()
    r = kbv("eval", PROBLEM, cand, "--device", "cpu", "--json", cand)
    assert r.returncode == 2 and "is the problem or candidate file itself" in r.stderr, r.stderr
    assert cand.read_text() == before


def test_eval_table_shows_each_speedups_interval_and_marks_noisy_ones():
    """The README says the table under eval's first line has each baseline's 95 % interval, and
    that ``~`` marks a noisy speedup (newcomer report, eighth session: neither was there)."""
    import dataclasses

    from rich.console import Console

    from kbv.batch.annotate import speedup_intervals
    from kbv.console import print_verdict
    from verdict_factory import make_verdict

    v = speedup_intervals(make_verdict("PASS", speedup=1.5, noisy=True))
    lo, hi = v.evidence["speedup_interval_95"]["eager-tf32"]
    con = Console(width=160, record=True)
    print_verdict(v, con)
    text = con.export_text()
    assert "1.50x ~ (95% " in text and "too noisy to rank" in text, text
    quiet = speedup_intervals(make_verdict("PASS", speedup=1.5))
    con = Console(width=160, record=True)
    print_verdict(dataclasses.replace(quiet), con)
    text = con.export_text()
    assert "1.50x (95% " in text and "~" not in text, text


def test_a_flagged_problem_is_said_right_under_the_first_line():
    """The flag went only to stderr after every table (newcomer report, eighth session)."""
    import dataclasses

    from rich.console import Console

    from kbv.console import print_verdict
    from verdict_factory import make_verdict

    v = dataclasses.replace(make_verdict("PASS", speedup=1.1),
                            problem_flags=("under-tolerance: output RMS below atol", "constant-output: one output"))
    con = Console(width=200, record=True)
    print_verdict(v, con)
    lines = con.export_text().splitlines()
    assert lines[0].startswith("PASS")
    assert "flagged by vetting (under-tolerance, constant-output)" in lines[1], lines[:3]
