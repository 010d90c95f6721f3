"""kbv — KernelBench-Verified: honest verdicts on LLM-written GPU kernels versus PyTorch.

The public Python API (README, "Python API"; defined in :mod:`kbv.api`)::

    import kbv
    verdict = kbv.verify("problem.py", candidate_source, kbv.EvalConfig(device="cpu"))
    verdict.status, verdict.speedup

``kbv.verify``, ``kbv.plan``, ``kbv.run``, ``kbv.metrics``, ``kbv.close``, ``kbv.make_config``, the
records ``kbv.EvalConfig``, ``kbv.Verdict``, ``kbv.Status`` and the ``kbv serve`` clients ``kbv.Client``,
``kbv.AsyncClient`` (:mod:`kbv.serve.client`) are loaded on first use, so that
``import kbv`` stays cheap (no torch, no numpy) for the CLI and for kbv's own workers.

The subpackages, lowest layer first, are :data:`LAYERS` (a module imports its own layer and those
below; tests/test_imports.py holds it, docs/architecture.md says what each holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: kbv's subpackages, lowest layer first: the one statement of the stage order.
LAYERS = ("model", "sandbox", "intake", "processes", "checks", "reference", "pipeline", "batch", "generate",
          "report")

#: public name -> the module that defines it (imported on first access, PEP 562).
_LAZY = {
    "verify": "kbv.api", "plan": "kbv.api", "run": "kbv.api", "metrics": "kbv.api", "close": "kbv.api",
    "make_config": "kbv.api",
    "EvalConfig": "kbv.model.records", "Verdict": "kbv.model.records", "Status": "kbv.model.records",
    "Client": "kbv.serve.client", "AsyncClient": "kbv.serve.client",  # the extra kbv[serve] (httpx)
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from kbv.api import close, make_config, metrics, plan, run, verify  # noqa: F401
    from kbv.model.records import EvalConfig, Status, Verdict  # noqa: F401
    from kbv.serve.client import AsyncClient, Client  # noqa: F401


def __getattr__(name: str):
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
