"""The first half of the pipeline: ask LLMs for kernels, refine them on kbv's verdicts, audit the
fast survivors with LLM judges, and fetch the KernelBench problems.

Modules (none of them imports or runs candidate code: generated files are only written to disk,
and every verification goes through :class:`kbv.batch.evaluator.Evaluator`):

* :mod:`kbv.generate.providers` — one chat call over the official ``openai`` / ``anthropic`` SDKs
  (streamed or not), usage, latency, cost;
* :mod:`kbv.generate.cache` — the response cache (same request → no new call);
* :mod:`kbv.generate.blind` — input-blind views of a problem (AST-based);
* :mod:`kbv.generate.prompts` — the prompts and the one-shot examples;
* :mod:`kbv.generate.extract` — code-block extraction;
* :mod:`kbv.generate.sampling` — ``kbv generate``: samples in KernelBench's run layout;
* :mod:`kbv.generate.feedback` — verdict → feedback text that holds no hidden value, and the reward;
* :mod:`kbv.generate.refine` — ``kbv refine`` and the Python reward loop;
* :mod:`kbv.generate.audit` / :mod:`kbv.generate.audit_store` — ``kbv audit``;
* :mod:`kbv.generate.dataset` — the KernelBench dataset from the Hugging Face Hub.

The typer commands ``kbv generate``, ``refine``, ``audit`` and ``dataset`` are :mod:`kbv.cli.generate`.

The SDKs are the optional extra ``kbv[llm]``; only the modules that call a provider import them.
"""
