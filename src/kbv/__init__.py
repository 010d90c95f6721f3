"""kbv — KernelBench-Verified: honest verdicts on LLM-written GPU kernels versus PyTorch.

The public Python API (README, "Python API"; defined in :mod:`kbv.api`)::

    import kbv
    verdict = kbv.verify("problem.py", candidate_source, kbv.EvalConfig(device="cpu"))
    verdict.status, verdict.speedup

``kbv.verify``, ``kbv.plan``, ``kbv.run``, ``kbv.metrics``, ``kbv.close``, ``kbv.make_config`` and the
records ``kbv.EvalConfig``, ``kbv.Verdict``, ``kbv.Status`` are loaded on first use, so that
``import kbv`` stays cheap (no torch, no numpy) for the CLI and for kbv's own workers.

``kbv.metrics`` is also the name of the module ``kbv/metrics.py``, and importing a submodule binds
it on the package under its name. So ``kbv.metrics`` is that module, made callable:
``kbv.metrics(store)`` calls :func:`kbv.api.metrics`, and ``from kbv import metrics`` or
``kbv.metrics.geomean`` still reach the module. (Interim: it goes when the batch side moves into a
subpackage, issue 11 item 1.)
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first access, PEP 562).
_LAZY = {
    "verify": "kbv.api", "plan": "kbv.api", "run": "kbv.api", "close": "kbv.api", "make_config": "kbv.api",
    "EvalConfig": "kbv.records", "Verdict": "kbv.records", "Status": "kbv.records",
}
#: API functions that share their name with a kbv submodule: the submodule, made callable.
_CALLABLE_MODULES = ("metrics",)

__all__ = ["__version__", *_CALLABLE_MODULES, *_LAZY]

if TYPE_CHECKING:
    from kbv.api import close, make_config, metrics, plan, run, verify
    from kbv.records import EvalConfig, Status, Verdict


class _CallableModule(types.ModuleType):
    """A kbv submodule that is also the API function of the same name (:mod:`kbv.api`)."""

    def __call__(self, *args, **kwargs):
        from kbv import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(types.ModuleType):
    """The ``kbv`` package: a submodule named in :data:`_CALLABLE_MODULES` is made callable when
    the import system binds it here (``setattr(kbv, "metrics", module)``)."""

    def __setattr__(self, name: str, value) -> None:
        if (name in _CALLABLE_MODULES and type(value) is types.ModuleType
                and value.__name__ == f"{__name__}.{name}"):
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    import importlib

    if name in _CALLABLE_MODULES:
        return importlib.import_module(f"{__name__}.{name}")  # bound (and made callable) by the import
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_CALLABLE_MODULES))
