"""Per-problem baseline timings measured once and cached: ``kbv baselines``.

Four baselines (labels as in :data:`kbv.batch.results.SPEEDUP_COLUMNS`, flags in :mod:`kbv.sandbox.numeric_flags`):

* ``eager-fp32`` — PyTorch eager, TF32 off for matmul and cuDNN (kbv's strict fp32);
* ``eager-tf32`` — PyTorch eager, TF32 on for both (KernelBench-Verified's TF32 baseline);
* ``eager-fp32-cudnn-tf32`` — PyTorch's default flags, matmul TF32 off, cuDNN TF32 on: the fp32
  baseline KernelBench and KernelBench-Verified measured (``baseline_time_torch.json``);
* ``compile`` — ``torch.compile(model)`` (inductor, default mode) run under the eager-tf32 flags.

:func:`kbv.pipeline.baseline_measure.measure_reference` runs inside the (trusted) reference worker: it times the problem's
reference model alone, on fresh ``get_inputs()`` draws, with the same timing loop and L2 flush as
a verification, interleaving the labels over ``timing_rounds`` rounds. The results are cached in
the batch :class:`~kbv.batch.store.Store` under a :class:`~kbv.batch.jobs.BaselineKey` (problem file hash,
device name, driver, torch version, precision, label): a cached figure is used only on the same
hardware and software it was measured on.

How ``kbv run`` uses the cache: the eager baselines are always re-timed side by side with every
candidate (the only way a speedup is measured in one run, on identical inputs). ``compile`` is not
timed per candidate (compiling the reference for every job would cost minutes); when a cached
``compile`` measurement matches the verdict's environment, :func:`attach_compile_speedup` adds
``speedup["compile"]`` (or ``unverified_speedup["compile"]``) = cached median / candidate median,
and the verdict's evidence says it came from the cache and when it was measured.

KernelBench's baseline JSON (``results/timing/<hardware>/baseline_time_torch.json`` and
``baseline_time_torch_compile_inductor_default.json``, ``{"level1": {"19_ReLU.py": {"mean": ms,
...}}}``): :func:`export_kernelbench_json` writes that layout from measured baselines (kbv adds
``baseline_time_torch_tf32.json`` for eager-tf32); :func:`import_kernelbench_json` reads it into
the store as *summaries* (mean, std, min, max, trials — KernelBench keeps no raw samples, so they
cannot become :class:`~kbv.model.records.Measurement` records). Imported summaries are kept for
reference and re-export; they never enter a speedup, since they lack the driver and torch version
a cache key needs and were measured on someone else's machine.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from kbv.model.records import Environment, Measurement, ProblemRef, Status, Verdict
from kbv.batch.jobs import BaselineKey, BaselineSummary
from kbv.batch.store import Store
from kbv.pipeline.baseline_measure import LABELS


#: label → KernelBench file name. ``baseline_time_torch.json`` was measured under PyTorch's default
#: flags (cuDNN TF32 on), so it is ``eager-fp32-cudnn-tf32``'s; ``baseline_time_torch_tf32.json`` is
#: KernelBench-Verified's TF32 file; kbv's strict ``eager-fp32`` has no KernelBench counterpart and
#: gets a kbv name.
KERNELBENCH_FILES: dict[str, str] = {
    "eager-fp32-cudnn-tf32": "baseline_time_torch.json",
    "compile": "baseline_time_torch_compile_inductor_default.json",
    "eager-tf32": "baseline_time_torch_tf32.json",
    "eager-fp32": "baseline_time_torch_fp32_strict.json",
}


@dataclass(frozen=True)
class BaselineRun:
    """What the reference worker measured for one problem."""

    environment: Environment
    measurements: Mapping[str, Measurement]  #: label → measurement.
    errors: Mapping[str, str]  #: label → one line, for a label that could not be timed.


# Decoding (orchestrator side) --------------------------------------------------------------------

def measurement_from_dict(d: Mapping[str, Any]) -> Measurement:
    """Rebuild a :class:`Measurement` from :func:`kbv.model.records.to_dict` output."""
    d = dict(d)
    d.pop("stats", None)
    d["times_ms"] = tuple(float(t) for t in d["times_ms"])
    names = {f.name for f in dataclasses.fields(Measurement)}
    return Measurement(**{k: v for k, v in d.items() if k in names})


def environment_from_dict(d: Mapping[str, Any]) -> Environment:
    names = {f.name for f in dataclasses.fields(Environment)}
    return Environment(**{k: v for k, v in d.items() if k in names})


def baseline_key(problem_sha256: str, env: Environment, precision: str, label: str) -> BaselineKey:
    """Cache key of a baseline measured (or to be looked up) in ``env``."""
    return BaselineKey(problem_sha256=problem_sha256, device_name=env.device_name or env.device,
                       driver=env.driver or "", torch_version=env.torch, precision=precision, label=label)


# Measuring (reference worker side) ---------------------------------------------------------------

# Cache use in a batch ------------------------------------------------------------------------------

def attach_compile_speedup(verdict: Verdict, store: Store) -> Verdict:
    """Add the speedup vs a cached ``compile`` baseline to a timed verdict (see the module doc).

    Unchanged when the verdict has no candidate timing or no cached measurement matches its
    environment (problem hash, device name, driver, torch version, precision).
    """
    cand = verdict.timing.get("candidate")
    if cand is None or "compile" in verdict.speedup or "compile" in verdict.unverified_speedup:
        return verdict
    key = baseline_key(verdict.problem.sha256, verdict.environment, verdict.config.precision, "compile")
    cached = store.get_baseline(key)
    if cached is None:
        return verdict
    ratio = cached.median_ms / cand.median_ms
    evidence = dict(verdict.evidence)
    evidence["compile_baseline"] = {
        "source": "kbv baselines cache (measured in a separate run, not side by side)",
        "median_ms": cached.median_ms, "trials": cached.trials,
        "measured_at": store.baseline_measured_at(key),
    }
    if verdict.status in (Status.PASS, Status.SHORTCUT):
        return dataclasses.replace(verdict, speedup={**verdict.speedup, "compile": ratio}, evidence=evidence)
    if verdict.unverified_speedup:
        return dataclasses.replace(verdict, unverified_speedup={**verdict.unverified_speedup, "compile": ratio},
                                   evidence=evidence)
    return verdict


# KernelBench JSON ------------------------------------------------------------------------------------

def _file_name(problem: ProblemRef) -> str:
    return Path(problem.path).name


def _safe_dir(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "unknown"
    return "_" + s if s.startswith(".") else s


def kernelbench_entry(m: Measurement, hardware: str, device: str) -> dict[str, Any]:
    """One problem's entry: ``{"mean", "std", "min", "max", "num_trials", "hardware", "device"}`` (ms)."""
    return {"mean": m.mean_ms, "std": m.std_ms, "min": m.min_ms, "max": m.max_ms, "num_trials": m.trials,
            "hardware": hardware, "device": device}


def export_kernelbench_json(store: Store, problems: Iterable[ProblemRef], out_dir: Path | str, *,
                            precision: str = "fp32") -> list[Path]:
    """Write ``<out_dir>/<hardware>/<file>.json`` in KernelBench's layout for every cached baseline
    of ``problems``: measured ones (the latest per device name when several drivers or torch
    versions were cached), then imported summaries where nothing was measured. Returns the files
    written."""
    by_sha: dict[str, list[ProblemRef]] = {}
    for p in problems:  # identical files share a hash, and so their timings
        by_sha.setdefault(p.sha256, []).append(p)
    latest: dict[tuple[str, str, str], tuple[BaselineKey, Measurement]] = {}
    for key, m in store.baselines():  # insertion order: a later row replaces an earlier one
        if key.problem_sha256 in by_sha and key.precision == precision and key.label in KERNELBENCH_FILES:
            latest[(key.device_name, key.label, key.problem_sha256)] = (key, m)
    docs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (hardware, label, sha), (key, m) in sorted(latest.items()):
        device = "cuda:0" if m.device == "cuda" else m.device
        for p in by_sha[sha]:
            level = f"level{p.level if p.level is not None else 0}"
            docs.setdefault((hardware, label), {}).setdefault(level, {})[_file_name(p)] = \
                kernelbench_entry(m, hardware, device)
    for key, summ in store.baseline_summaries():  # imported figures where nothing was measured
        if key.precision != precision or key.label not in KERNELBENCH_FILES:
            continue
        for p in by_sha.get(key.problem_sha256, ()):
            level = f"level{p.level if p.level is not None else 0}"
            docs.setdefault((key.device_name, key.label), {}).setdefault(level, {}).setdefault(
                _file_name(p), {"mean": summ.mean_ms, "std": summ.std_ms, "min": summ.min_ms,
                                "max": summ.max_ms, "num_trials": summ.num_trials, "hardware": key.device_name,
                                "device": summ.device})
    written = []
    for (hardware, label), doc in sorted(docs.items()):
        path = Path(out_dir) / _safe_dir(hardware) / KERNELBENCH_FILES[label]
        path.parent.mkdir(parents=True, exist_ok=True)
        ordered = {lv: dict(sorted(doc[lv].items(), key=lambda kv: (_leading_int(kv[0]), kv[0])))
                   for lv in sorted(doc, key=_leading_int)}
        path.write_text(json.dumps(ordered, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


def _leading_int(text: str) -> int:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else 0


@dataclass(frozen=True)
class ImportResult:
    imported: int  #: entries stored.
    unmatched: tuple[str, ...]  #: ``level1/19_ReLU.py`` entries with no problem file of that name.
    files: tuple[Path, ...]  #: JSON files read.


def _label_of(path: Path) -> str | None:
    for label, name in KERNELBENCH_FILES.items():
        if path.name == name:
            return label
    return None


def import_kernelbench_json(store: Store, problems: Iterable[ProblemRef], source: Path | str, *,
                            precision: str = "fp32") -> ImportResult:
    """Read KernelBench baseline JSON (a file, a ``<hardware>`` folder or a ``results/timing`` folder)
    into the store as summaries, matched to ``problems`` by level and file name.

    Raises:
        ValueError: a file is not KernelBench baseline JSON, or no such file was found.
    """
    source = Path(source)
    files = [source] if source.is_file() else sorted(
        p for p in source.rglob("*.json") if _label_of(p) is not None)
    if not files:
        raise ValueError(f"{source}: no KernelBench baseline JSON ({', '.join(KERNELBENCH_FILES.values())})")
    by_name = {(f"level{p.level if p.level is not None else 0}", _file_name(p)): p for p in problems}
    imported, unmatched = 0, []
    for path in files:
        label = _label_of(path)
        if label is None:
            raise ValueError(f"{path}: file name is none of {', '.join(KERNELBENCH_FILES.values())}")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not readable JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected an object of levels")
        for level, entries in doc.items():
            if not isinstance(entries, dict):
                raise ValueError(f"{path}: {level} is not an object of problems")
            for fname, e in entries.items():
                p = by_name.get((level, fname))
                if p is None:
                    unmatched.append(f"{level}/{fname}")
                    continue
                try:
                    summary = BaselineSummary(
                        mean_ms=float(e["mean"]), std_ms=float(e.get("std", math.nan)),
                        min_ms=float(e.get("min", math.nan)), max_ms=float(e.get("max", math.nan)),
                        num_trials=int(e.get("num_trials", 0)), device=str(e.get("device", "")),
                        source=str(path))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}: {level}/{fname}: malformed entry ({exc})") from None
                hardware = str(e.get("hardware") or path.parent.name)
                store.put_baseline_summary(BaselineKey(p.sha256, hardware, "", "", precision, label), summary)
                imported += 1
    return ImportResult(imported, tuple(unmatched), tuple(files))


__all__ = ["LABELS", "KERNELBENCH_FILES", "BaselineRun", "attach_compile_speedup",
           "baseline_key", "export_kernelbench_json", "import_kernelbench_json", "ImportResult",
           "measurement_from_dict", "environment_from_dict"]
