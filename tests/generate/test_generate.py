"""kbv.generate: providers over the real SDKs against a loopback server, the response cache,
extraction, input-blind prompts over every problem kbv ships or tests, feedback that holds no
hidden value, the reward, the audit table, the KernelBench dataset loader, and (slow) the whole
pipeline generate → run → refine → audit → report end to end."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from kbv.cli.main import app  # noqa: E402
from kbv.generate.audit import JUDGE_SYSTEM, JudgeSpec, parse_judgement, run_audit  # noqa: E402
from kbv.generate.audit_store import agreement, audit_rows, labels_by_verdict, verdict_key  # noqa: E402
from kbv.generate.blind import blind_view  # noqa: E402
from kbv.generate.cache import ResponseCache  # noqa: E402
from kbv.generate.extract import ExtractionError, extract_model_new  # noqa: E402
from kbv.generate.feedback import feedback_text, reward, secrets_of  # noqa: E402
from kbv.generate.prompts import PromptOptions, problem_text, task_prompt  # noqa: E402
from kbv.generate.providers import ChatRequest, Message, Pricing, ProviderError, complete  # noqa: E402
from kbv.generate.sampling import GenerationSettings, generate  # noqa: E402
from kbv.intake.problems import load_problem  # noqa: E402
from kbv.model.records import Status  # noqa: E402
from kbv.batch.store import Store  # noqa: E402
from llm_server import LoopbackLLM  # noqa: E402
from verdict_factory import job_for, make_verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROBLEM_FILES = sorted((ROOT / "tests" / "data" / "problems").rglob("*.py")) + sorted(
    (ROOT / "src" / "kbv" / "data" / "problems").rglob("*.py"))
BUILTIN_RELU = ROOT / "src" / "kbv" / "data" / "problems" / "level1" / "1_ReLU.py"
runner = CliRunner()

GOOD = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return x.clamp_min(0.0)\n")
# Right on the nominal inputs (torch.rand: [0, 1)), wrong wherever an input is negative.
ABS = GOOD.replace("x.clamp_min(0.0)", "x.abs()")


def answer(code: str) -> str:
    return f"Here is the kernel.\n\n```python\n{code}```\n\nIt avoids the reference op."


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback")


# Providers and cache ------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_providers_plain_and_streamed(keys, provider, stream):
    with LoopbackLLM(lambda p, b: answer(GOOD)) as srv:
        url = srv.openai_url if provider == "openai" else srv.anthropic_url
        req = ChatRequest(provider, "m-1", "sys", (Message("user", "hello"),), temperature=0.2, base_url=url,
                          stream=stream)
        done = complete(req, pricing=Pricing(2.0, 10.0))
        proto, body = srv.requests[-1]
    assert proto == provider and body.get("stream", False) is stream
    assert done.text == answer(GOOD)
    assert done.tokens_out == len(answer(GOOD)) // 4 and done.tokens_in is not None
    assert done.cost_usd == pytest.approx((done.tokens_in * 2.0 + done.tokens_out * 10.0) / 1e6)
    assert done.latency_s > 0 and done.raw and done.finish_reason in ("stop", "end_turn")
    assert body["temperature"] == 0.2
    if provider == "anthropic":
        assert body["system"] == "sys"
    else:
        assert body["messages"][0] == {"role": "system", "content": "sys"}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_retries_on_429_and_5xx_then_gives_up(keys, provider):
    with LoopbackLLM(lambda p, b: answer(GOOD)) as srv:
        url = srv.openai_url if provider == "openai" else srv.anthropic_url
        req = ChatRequest(provider, "m", "s", (Message("user", "x"),), base_url=url)
        srv.fail_next = [429, 503]
        assert complete(req, max_retries=3).text == answer(GOOD)
        assert len(srv.requests) == 3
        srv.fail_next = [429] * 5
        with pytest.raises(ProviderError, match="429"):
            complete(req, max_retries=1)


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        complete(ChatRequest("anthropic", "m", "s", (Message("user", "x"),)))


def test_cache_answers_a_repeated_request(keys, tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    with LoopbackLLM(lambda p, b: answer(GOOD)) as srv:
        req = ChatRequest("openai", "m", "s", (Message("user", "x"),), base_url=srv.openai_url)
        first = cache.complete(req)
        second = cache.complete(dataclasses.replace(req, stream=True))  # streaming is not part of the key
        third = cache.complete(dataclasses.replace(req, sample=1))  # another sample is another request
    assert not first.cached and second.cached and not third.cached
    assert second.text == first.text and len(srv.requests) == 2


# Extraction ---------------------------------------------------------------------------------------

def test_extract_last_block_defining_model_new():
    text = "```python\nclass ModelNew: pass  # draft\n```\ntext\n```py\nimport torch\nclass ModelNew(object):\n    x = 1\n```"
    assert extract_model_new(text) == "import torch\nclass ModelNew(object):\n    x = 1\n"
    assert "ModelNew" in extract_model_new("```\nclass ModelNew:\n    pass\n```")
    with pytest.raises(ExtractionError, match="no ```python code block"):
        extract_model_new("I cannot help with that.")
    with pytest.raises(ExtractionError, match="defines class ModelNew"):
        extract_model_new("```python\nclass Model: pass\n```")
    with pytest.raises(ExtractionError, match="empty"):
        extract_model_new("  ")


# Input-blind prompts ------------------------------------------------------------------------------

def _numbers(node: ast.AST) -> set:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)}


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_input_blind_view_hides_the_test_configuration(path):
    src = path.read_text()
    tree = ast.parse(src)
    view = blind_view(src)
    out = ast.parse(view.source)
    # Model is kept whole; the input functions exist with their bodies withheld
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    assert ast.dump(model) in {ast.dump(n) for n in out.body}
    for name in ("get_inputs", "get_init_inputs"):
        fn = next(n for n in out.body if isinstance(n, ast.FunctionDef) and n.name == name)
        assert [type(s.value.value) for s in fn.body] == [str, type(...)]
    # no constant that only the input functions read survives, nor any number they hold
    kept_names = {t.id for n in out.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert not kept_names & set(view.dropped_constants)
    secret = set()
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs"):
            secret |= _numbers(n)
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in view.dropped_constants
                                               for t in n.targets):
            secret |= _numbers(n.value)
    allowed = _numbers(model) | {0, 1, -1}
    leaked = (_numbers(out) & secret) - allowed
    assert not leaked, f"{path.name}: blind view shows {leaked}"
    shown = problem_text(src, True)
    assert "torch.rand" not in shown.split("class Model")[0] and "get_inputs" in shown
    assert view.arguments and all(":" in a for a in view.arguments)


def test_input_blind_keeps_what_model_reads_and_drops_the_rest():
    src = ("import torch\nimport torch.nn as nn\nSCALE = 2.5\nBASE = 7\nDERIVED = BASE * 3\nbatch_size = 16\n"
           "dim = 4096\nKBV_METADATA = {'input_domains': {'x': 'positive'}}\n\n"
           "class Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
           "        self.w = nn.Parameter(torch.ones(dim) * SCALE + DERIVED)\n"
           "    def forward(self, x, n: int):\n        dim = x.shape[-1]\n        return x * self.w[:dim]\n\n"
           "def get_inputs():\n    x = torch.rand(batch_size, dim)\n    mask = x > 0.5\n    return [x, 3]\n\n"
           "def get_init_inputs():\n    return [dim]\n\nif __name__ == '__main__':\n    print(get_inputs())\n")
    view = blind_view(src)
    assert set(view.dropped_constants) == {"batch_size", "dim"}
    for kept in ("SCALE = 2.5", "BASE = 7", "DERIVED = BASE * 3", "KBV_METADATA"):
        assert kept in view.source
    assert "4096" not in view.source and "16" not in view.source and "print" not in view.source
    assert view.arguments == ("x: float tensor, 2-D", "n: Python int")


def test_argument_kinds_name_integer_targets():
    src = (ROOT / "tests/data/problems/level1/4_Small_NLL.py").read_text()
    assert blind_view(src).arguments == ("predictions: float tensor, 2-D", "targets: integer tensor, 1-D")


def test_prompts_show_the_file_or_the_blind_view():
    src = BUILTIN_RELU.read_text()
    full = task_prompt(src, PromptOptions("triton", "fp32", False))
    blind = task_prompt(src, PromptOptions("cuda", "bf16", True))
    assert "dim = 16384" in full and "@triton.jit" in full
    assert "16384" not in blind and "batch_size" not in blind and "load_inline" in blind and "bfloat16" in blind
    with pytest.raises(ValueError):
        PromptOptions("rocm")


# Feedback and reward ------------------------------------------------------------------------------

def test_feedback_holds_no_seed_no_hidden_name_no_hidden_fault():
    v = make_verdict("INCORRECT", nominal_fail=True, hidden_fail=["D2", "D4"])
    text = feedback_text(v)
    for s in secrets_of(v):
        assert s not in text
    for hidden in ("D1", "D2", "D4", "x-1", "x3", "negative"):
        assert hidden not in text
    assert "nominal-0 failed" in text and "Hidden checks" in text and "2 of 4 passed" in text
    r = reward(v)
    assert r.score == 0.1 and r.status == "INCORRECT" and r.feedback == text


def test_feedback_masks_runtime_messages_and_seeds_anywhere():
    v = make_verdict("RUNTIME_ERROR", message="c.py: forward raised ValueError: bad value 0.73125 at 1000")
    text = feedback_text(v)
    assert "ValueError" in text and "0.73125" not in text and "1000" not in text
    leaky = make_verdict("COMPILE_ERROR", evidence={"log_tail": "seed was 2001 and 1002"})
    leaky = dataclasses.replace(leaky, input_sets=make_verdict("INCORRECT", hidden_fail=["D1"]).input_sets,
                                status=Status.INCORRECT)
    assert "2001" not in feedback_text(leaky)


def test_reward_definition():
    assert reward(make_verdict("PASS", speedup=2.0)).score == pytest.approx(1.5)
    assert reward(make_verdict("PASS", speedup=100.0)).score == pytest.approx(2.5)
    assert reward(make_verdict("PASS", speedup=0.25)).score == pytest.approx(0.5)
    assert reward(make_verdict("HACK")).score == -1.0
    assert reward(make_verdict("SHORTCUT", speedup=3.0)).score == 0.3
    assert reward(make_verdict("COMPILE_ERROR")).score == 0.0
    eval_error = reward(make_verdict("EVAL_ERROR"))
    assert eval_error.score == 0.0 and not eval_error.valid


def test_a_speedup_the_trusted_side_did_not_confirm_earns_the_least_pass_reward():
    """A forger credited its trusted floor scored 1.0, above an honest slower-than-eager kernel's
    0.5 (issue 19's red team): a flagged PASS scores 0.5 whatever its credited speedup."""
    from kbv.model.findings import finding
    from kbv.model.records import Severity

    fast = make_verdict("PASS", speedup=4.0)
    flagged = dataclasses.replace(fast, findings=(*fast.findings, finding(
        "timing:claim-below-bound", (4, 25), Severity.WARNING, "the claim is under the trusted floor")))
    assert reward(flagged).score == pytest.approx(0.5) and reward(fast).score == pytest.approx(2.0)
    slow = make_verdict("PASS", speedup=0.5)
    assert reward(dataclasses.replace(slow, findings=flagged.findings)).score == pytest.approx(0.5)


# generate -----------------------------------------------------------------------------------------

def test_an_answer_of_another_backend_than_asked_earns_nothing_and_is_told(tmp_path):
    """``kbv refine --backend cpp`` credited a plain-torch answer as PASS, reward 0.5 (issue 25):
    the backend asked for counts in the reward and the feedback."""
    def as_backend(v, backend):
        return dataclasses.replace(v, candidate=dataclasses.replace(v.candidate, backend=backend))

    torch_pass = as_backend(make_verdict("PASS", speedup=2.0), "torch")
    asked_cpp = reward(torch_pass, backend="cpp")
    assert asked_cpp.score == 0.0 and asked_cpp.status == "PASS" and asked_cpp.wrong_backend
    assert asked_cpp.status_score == pytest.approx(1.5)
    lines = asked_cpp.feedback.splitlines()
    assert lines[0].startswith("Status: PASS") and lines[1].startswith("Wrong backend: you were asked for C++")
    assert "plain PyTorch" in lines[1]
    assert reward(torch_pass).score == pytest.approx(1.5)  # nothing asked: any backend counts
    cpp_pass = as_backend(make_verdict("PASS", speedup=2.0), "cpp")
    assert reward(cpp_pass, backend="cpp").score == pytest.approx(1.5) and not reward(cpp_pass, backend="cpp").wrong_backend
    assert "Wrong backend" not in reward(cpp_pass, backend="cpp").feedback
    assert reward(as_backend(make_verdict("HACK"), "torch"), backend="cpp").score == -1.0  # a cheat stays -1
    wrong_incorrect = reward(as_backend(make_verdict("INCORRECT", hidden_fail=["D1"]), "torch"), backend="cpp")
    assert wrong_incorrect.score == 0.0 and wrong_incorrect.status_score < asked_cpp.status_score
    kbv_failed = reward(as_backend(make_verdict("EVAL_ERROR"), "torch"), backend="cpp")
    assert not kbv_failed.wrong_backend and "Wrong backend" not in kbv_failed.feedback  # says nothing of the model


def test_generate_writes_layout_metadata_and_per_sample_failures(keys, tmp_path):
    answers = iter([answer(GOOD), "Sorry, no code today."])
    with LoopbackLLM(lambda p, b: next(answers)) as srv:
        settings = GenerationSettings("openai", "m", base_url=srv.openai_url, temperature=0.0,
                                      prompt=PromptOptions("cuda", "fp32", True))
        results = generate([load_problem(BUILTIN_RELU)], settings, tmp_path / "run", samples=2, concurrency=1,
                           cache=ResponseCache(tmp_path / "cache"))
        sent = srv.requests[0][1]["messages"][1]["content"]
    assert "16384" not in sent and "batch_size" not in sent  # --input-blind reached the wire
    ok, bad = results
    assert Path(ok.kernel_path).read_text() == GOOD and ok.error is None
    assert bad.kernel_path is None and "no ```python code block" in bad.error
    assert not (tmp_path / "run" / "level_1_problem_1_sample_1_kernel.py").exists()
    meta = json.loads(Path(ok.meta_path).read_text())
    assert meta["model"] == "m" and meta["parameters"]["input_blind"] is True and len(meta["prompt_hash"]) == 64
    assert meta["tokens_out"] > 0 and meta["latency_s"] > 0 and meta["raw"]["choices"] and meta["text"]
    assert json.loads(Path(bad.meta_path).read_text())["error"] == bad.error


# audit --------------------------------------------------------------------------------------------

def test_parse_judgement():
    assert parse_judgement('```json\n{"label": "Shape-Specialized", "rationale": "hard-codes 4096"}\n```') == (
        "shape_specialised", "hard-codes 4096")
    assert parse_judgement('{"label": "genuine", "rationale": "tiles"}')[0] == "genuine"
    assert parse_judgement("I think it is fine")[0] == "unparseable"
    assert JudgeSpec.parse("openai:gpt-x@http://h:1/v1") == JudgeSpec("openai", "gpt-x", "http://h:1/v1")
    with pytest.raises(ValueError):
        JudgeSpec.parse("gemini:pro")


def _store_with_pass_kernels(tmp_path: Path) -> Path:
    db = tmp_path / "batch.db"
    prob = tmp_path / "p.py"
    prob.write_text(BUILTIN_RELU.read_text())
    with Store(db) as st:
        for i, (status, sp) in enumerate([("PASS", 3.0), ("PASS", 0.5), ("INCORRECT", None), ("PASS", 2.0)]):
            cand = tmp_path / f"c{i}.py"
            cand.write_text(GOOD + f"# {i}\n")
            v = make_verdict(status, sample_id=i, speedup=sp, hidden_fail=["D1"] if status == "INCORRECT" else ())
            v = dataclasses.replace(v, problem=dataclasses.replace(v.problem, path=str(prob)),
                                    candidate=dataclasses.replace(v.candidate, path=str(cand)))
            job = job_for(v)
            st.add_jobs([job])
            st.put_verdict(job, v)
    return db


def test_audit_labels_fast_pass_kernels_and_flags_disagreement(keys, tmp_path):
    db = _store_with_pass_kernels(tmp_path)

    def judge(protocol, body):
        is_b = body["model"] == "judge-b"
        prompt = body["messages"][-1]["content"]
        label = "exploit" if is_b and "# 3\n" in prompt else "genuine"
        return f'```json\n{{"label": "{label}", "rationale": "reads the code"}}\n```'

    with LoopbackLLM(judge) as srv:
        judges = [JudgeSpec("openai", "judge-a", srv.openai_url), JudgeSpec("anthropic", "judge-b", srv.anthropic_url)]
        out = run_audit(db, judges, min_speedup=1.0)
        assert all(JUDGE_SYSTEM in (b.get("system") or b["messages"][0]["content"]) for _, b in srv.requests)
    assert out.kernels == 2 and out.judged == 4 and not out.skipped
    rows = audit_rows(db)
    assert [(r.sample_id, r.consensus, r.needs_review) for r in rows] == [(0, "genuine", False), (3, None, True)]
    assert rows[1].display == "review: exploit / genuine"  # judges in name order: anthropic:, openai:
    ag = agreement(rows, ("openai:judge-a", "anthropic:judge-b"))
    assert (ag.jobs, ag.agreed) == (2, 1) and ag.kappa == pytest.approx(0.0)
    with Store(db) as st:  # verdicts untouched; the report can find each audit from a verdict
        assert st.status_counts() == {"PASS": 3, "INCORRECT": 1}
        by_v = labels_by_verdict(db)
        found = [by_v.get(verdict_key(v)) for v in st.verdicts()]
    assert sum(r is not None for r in found) == 2
    with pytest.raises(ValueError, match="two distinct judges"):
        run_audit(db, judges[:1])


def test_unparseable_answers_are_no_agreement_and_are_counted_apart():
    """Two answers without a rubric label were counted as agreement: 2/2, 100 % (issue 25)."""
    from kbv.generate.audit_store import AuditRow

    def row(i, a, b):
        return AuditRow(f"k{i}", "m", f"p{i}", 0, "c", "p", 2.0, {"j1": a, "j2": b}, {"j1": "", "j2": ""})

    rows = [row(0, "unparseable", "unparseable"), row(1, "genuine", "unparseable"), row(2, "genuine", "genuine")]
    ag = agreement(rows, ("j1", "j2"))
    assert (ag.jobs, ag.agreed, ag.unparseable, ag.rate) == (1, 1, 2, 1.0)
    assert not rows[0].agreed and rows[0].needs_review
    none = agreement(rows[:1], ("j1", "j2"))
    assert (none.jobs, none.agreed, none.unparseable, none.rate, none.kappa) == (0, 0, 1, None, None)


def test_cache_keys_on_the_server_even_when_named_by_the_sdk_variable(monkeypatch):
    """The SDK reads OPENAI_BASE_URL when no base_url is given; the cache ignored it, so another
    server's old answers came back (issue 25)."""
    req = ChatRequest("openai", "m", "s", (Message("user", "x"),))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    plain = req.key()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://a:1/v1")
    via_a = req.key()
    assert via_a != plain and via_a == dataclasses.replace(req, base_url="http://a:1/v1").key()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://b:1/v1")
    assert req.key() not in (plain, via_a)
    assert dataclasses.replace(req, model="m2").key() != req.key()


def test_audit_base_url_option_the_servers_answers_and_unparseable_said(keys, tmp_path, monkeypatch):
    """``kbv audit --base-url`` (documented in its help) points every judge given without @url at
    one server; answers cached from another server (reached through OPENAI_BASE_URL) never come back;
    an unparseable answer is said and not counted as agreement."""
    db = _store_with_pass_kernels(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    help_text = runner.invoke(app, ["audit", "--help"], env={"COLUMNS": "200"}).output
    assert "--base-url" in help_text and "without @base_url" in help_text
    judges = ["--judge", "openai:judge-a", "--judge", "openai:judge-b"]
    with LoopbackLLM(lambda p, b: '{"label": "genuine", "rationale": "tiles"}') as first:
        monkeypatch.setenv("OPENAI_BASE_URL", first.openai_url)
        res = runner.invoke(app, ["audit", "--store", str(db), *judges, *cache])
        assert res.exit_code == 0, res.output
        assert "2/2 (100%)" in res.output and len(first.requests) == 4
    monkeypatch.delenv("OPENAI_BASE_URL")
    with LoopbackLLM(lambda p, b: "I cannot tell." if b["model"] == "judge-b" else
                     '{"label": "exploit", "rationale": "caches"}') as second:
        res = runner.invoke(app, ["audit", "--store", str(db), *judges, "--base-url", second.openai_url, *cache])
        assert res.exit_code == 0, res.output
        assert len(second.requests) == 4  # nothing from the first server's cache
    rows = audit_rows(db)
    assert {r.labels["openai:judge-a"] for r in rows} == {"exploit"}
    assert {r.labels["openai:judge-b"] for r in rows} == {"unparseable"} and all(r.needs_review for r in rows)
    out = " ".join(res.output.split())
    assert "0/0 (-)" in out and "2 kernel(s) with an answer that had no rubric label, not counted as agreement" in out


# dataset ------------------------------------------------------------------------------------------

def test_dataset_from_local_parquet_of_the_hub_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    code = BUILTIN_RELU.read_text()
    table = pa.table({"code": [code, code.replace("relu", "sigmoid"), code], "level": [1, 1, 2],
                      "name": ["19_ReLU.py", "23_Sig moid", "7_ReLU_again"], "problem_id": [19, 23, 7]})
    pq.write_table(table, tmp_path / "level_1-00000-of-00001.parquet")
    out = tmp_path / "KernelBench"
    res = runner.invoke(app, ["dataset", "--out", str(out), "--from-parquet",
                              str(tmp_path / "level_1-00000-of-00001.parquet"), "--level", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.py")) == ["level1/19_ReLU.py",
                                                                                "level1/23_Sig_moid.py"]
    from kbv.intake.layout import vet_problems

    refs = vet_problems(out).problems
    assert [(r.level, r.problem_id, r.name) for r in refs] == [(1, 19, "ReLU"), (1, 23, "Sig_moid")]
    pq.write_table(pa.table({"code": [code], "level": [1]}), tmp_path / "bad.parquet")
    res = runner.invoke(app, ["dataset", "--out", str(out), "--from-parquet", str(tmp_path / "bad.parquet")])
    assert res.exit_code == 2 and "missing column" in res.output


# The whole pipeline -------------------------------------------------------------------------------

def _pipeline_responder(protocol: str, body: dict) -> str:
    system = body.get("system") or body["messages"][0]["content"]
    if JUDGE_SYSTEM in system:
        return '{"label": "genuine", "rationale": "clamps every element; no size assumption"}'
    users = [m for m in body["messages"] if m["role"] == "user"]
    if body["model"] == "refiner" and len(users) == 1:
        return answer(ABS)  # first refine turn: right on [0, 1), wrong on the hidden negatives
    return answer(GOOD)


@pytest.mark.slow
def test_pipeline_generate_run_refine_audit_report(keys, tmp_path):
    fast = ["--device", "cpu", "--seeds", "1", "--trials", "3", "--warmup", "0"]
    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    (problems / BUILTIN_RELU.name).write_text(BUILTIN_RELU.read_text())
    runs, cache = tmp_path / "runs", ["--cache-dir", str(tmp_path / "cache")]
    db = tmp_path / "batch.db"
    with LoopbackLLM(_pipeline_responder) as srv:
        for provider, url, stream in (("openai", srv.openai_url, "--stream"), ("anthropic", srv.anthropic_url,
                                                                                "--no-stream")):
            res = runner.invoke(app, ["generate", str(problems.parent), "--provider", provider, "--model", "gen",
                                      "--base-url", url, "--samples", "2", "--out", str(runs / provider),
                                      "--backend", "cpp", "--input-blind", stream, *cache])
            assert res.exit_code == 0, res.output
            assert "2/2 sample(s) written" in res.output
            for s in (0, 1):
                assert (runs / provider / f"level_1_problem_1_sample_{s}_kernel.py").read_text() == GOOD
        assert {p for p, _ in srv.requests} == {"openai", "anthropic"}
        n = len(srv.requests)
        res = runner.invoke(app, ["generate", str(problems.parent), "--provider", "openai", "--model", "gen",
                                  "--base-url", srv.openai_url, "--samples", "2", "--out", str(runs / "openai"),
                                  "--backend", "cpp", "--input-blind", *cache])
        assert res.exit_code == 0 and len(srv.requests) == n and "(2 from the cache)" in res.output

        # the anthropic samples are the same text as the openai ones: verifying two is enough (CPU time)
        res = runner.invoke(app, ["run", str(problems.parent), str(runs), "--runs", "openai", "--store", str(db),
                                  *fast])
        assert res.exit_code == 0, res.output
        with Store(db) as st:
            assert st.status_counts() == {"PASS": 2}

        refined = tmp_path / "refined"
        res = runner.invoke(app, ["refine", str(problems.parent), "--provider", "anthropic", "--model", "refiner",
                                  "--base-url", srv.anthropic_url, "--turns", "2", "--out", str(refined),
                                  "--backend", "cpp", "--input-blind", *fast, *cache])
        assert res.exit_code == 0, res.output
        assert "not the cpp backend asked for" in res.output
        tdir = refined / "refine" / "level_1_problem_1_sample_0"
        t1, t2 = (json.loads((tdir / f"turn_{k}.json").read_text()) for k in (1, 2))
        # turn 1 is wrong off the nominal range (kbv also names it a passthrough there: HACK)
        assert t1["verdict"]["status"] in ("INCORRECT", "HACK") and t2["verdict"]["status"] == "PASS"
        # C++ was asked for and both answers are plain torch: no reward, and the feedback says why;
        # the correct one is still the better turn
        assert t1["reward"]["score"] <= 0.0 and t2["reward"]["score"] == 0.0
        assert "Wrong backend" in t2["reward"]["feedback"]
        assert t1["reward"]["status_score"] < t2["reward"]["status_score"]
        summary = json.loads((tdir / "refine.json").read_text())
        assert summary["best_turn"] == 2
        assert (refined / "level_1_problem_1_sample_0_kernel.py").read_text() == GOOD
        # the feedback the model got back: the real verdict's secrets are nowhere in it
        feedback = t1["reward"]["feedback"]
        turn2_prompt = next(b for p, b in srv.requests if b["model"] == "refiner"
                            and len([m for m in b["messages"] if m["role"] == "user"]) == 2)
        sent = turn2_prompt["messages"][-1]["content"]
        assert feedback in sent and "Hidden checks" in feedback and "passed" in feedback
        sets = t1["verdict"]["input_sets"]
        assert any(s["passed"] is False for s in sets)
        for s in sets:
            assert str(s["seed"]) not in sent
            # hidden sets are never named (kbv's plain-word distribution names such as "fresh" or
            # "normal" are checked by the distinctive ones: D1-D4, sign-flip, heavy-tail, ...)
            if s["kind"] != "nominal" and re.search(r"[-\d]", s["name"]):
                assert not re.search(rf"\b{re.escape(s['name'])}\b", sent), s["name"]
            if s["kind"] == "hidden":
                assert f" {s['transform']}" not in sent and f"({s['transform']}" not in sent
        for m in turn2_prompt["messages"]:
            assert "16384" not in m["content"] and "batch_size" not in m["content"]

        res = runner.invoke(app, ["audit", "--store", str(db), "--judge", f"openai:judge-a@{srv.openai_url}",
                                  "--judge", f"anthropic:judge-b@{srv.anthropic_url}", "--min-speedup", "0",
                                  "--baseline", "eager-fp32", "--out", str(tmp_path / "audit"), *cache])
        assert res.exit_code == 0, res.output
        assert "2/2 (100%)" in res.output and "0 kernel(s) flagged" in res.output
    rows = audit_rows(db)
    assert len(rows) == 2 and all(r.consensus == "genuine" for r in rows)
    res = runner.invoke(app, ["report", "--store", str(db), "--out", str(tmp_path / "report")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report" / "report.html").is_file()


def test_score_candidate_rejects_a_file_without_model_new_without_running_it(tmp_path):
    from kbv.generate.refine import score_candidate
    from kbv.model.records import EvalConfig

    class NoEvaluator:  # static vetting must decide before any worker is asked
        def evaluate(self, *a, **k):
            raise AssertionError("a statically rejected candidate reached the evaluator")

    r, v = score_candidate(load_problem(BUILTIN_RELU), "class Model:\n    pass\n", EvalConfig(device="cpu"),
                           NoEvaluator(), path=tmp_path / "c.py")
    assert v.status is Status.COMPILE_ERROR and r.score == 0.0 and "ModelNew" in r.feedback
    # the message names the file as the sender knows it, not kbv's copy (newcomer, kbv serve)
    assert str(tmp_path) not in v.message and "c.py" in v.message, v.message


def test_feedback_gives_the_candidates_own_kernel_figures_never_the_references():
    """``--profile`` / ``--sanitize`` evidence in the feedback (issue 24): the candidate's kernels and
    the sanitizer's reports; the reference's kernels stay out."""
    ncu = {"candidate": {"kernels": [{"name": "relu_kernel", "duration_ms": 0.0123, "sm_pct": 12.0, "dram_pct": 80.5,
                                      "occupancy_pct": 75.0, "registers": 16, "shared_bytes": 0,
                                      "stalls": [["long_scoreboard", 9.1]]}]},
           "reference": {"kernels": [{"name": "at_native_secret_kernel", "duration_ms": 0.01}]}}
    sanitize = {"memcheck": {"count": 1, "reports": ["Invalid __global__ read of size 4 bytes in relu_kernel"],
                             "failed": None}, "racecheck": {"count": 0, "reports": [], "failed": None}}
    v = make_verdict("INCORRECT", nominal_fail=True, evidence={"ncu": ncu, "sanitize": sanitize})
    text = feedback_text(v)
    assert "Kernel relu_kernel: 0.0123 ms, SM 12%, DRAM 80%, occupancy 75%, 16 registers/thread" in text
    assert "top stalls: long_scoreboard" in text
    assert "compute-sanitizer memcheck: 1 report(s); first: Invalid __global__ read" in text
    assert "compute-sanitizer racecheck: clean." in text
    assert "at_native_secret_kernel" not in text


def test_refine_says_a_providers_failure_and_asks_cpu_verification_for_cpp(keys, tmp_path):
    """Newcomer 2026-12-05: a refine against an unreachable server printed only "no turn produced
    code" and exited 0, and ``--device cpu`` asked the model for CUDA."""
    import socket

    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    (problems / BUILTIN_RELU.name).write_text(BUILTIN_RELU.read_text())
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "refined"
    res = runner.invoke(app, ["refine", str(problems.parent), "--provider", "openai", "--model", "m",
                              "--base-url", f"http://127.0.0.1:{port}/v1", "--turns", "1", "--out", str(out),
                              "--device", "cpu", "--max-retries", "0", "--no-cache"])
    assert res.exit_code == 1, res.output
    assert "provider error" in res.output and "level 1 problem 1 sample 0 turn 1" in res.output, res.output
    record = json.loads((out / "refine" / "level_1_problem_1_sample_0" / "turn_1.json").read_text())
    assert record["parameters"]["backend"] == "cpp" and "Connection" in record["error"]
