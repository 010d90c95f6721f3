"""The candidate at each declared workload of its problem (:mod:`kbv.reference.workloads`), one whole
verification per workload, folded into one verdict by :func:`kbv.pipeline.verdict.combine_workloads`.

The problem's own sizes (``nominal``) come first, with the hidden-test file (its sets are drawn at
those sizes) and the secret shape; each declared workload then runs in the order written, its
reference built at its sizes (:func:`kbv.intake.sizes.with_sizes`) and released before the next,
with a fresh candidate worker, its own seeds, probes, timed rounds, trusted bound and secret shape:
for each size constant the workload raises, a secret odd size between the problem's own and the
workload's (a kernel tiled for the declared sizes, right at 512 and 1536 and wrong at 700, is seen
there: red-team helper, 2026-12-05), the others smaller as at the problem's own sizes. A workload
that is not PASS or SHORTCUT ends the run: the verdict is already decided by it.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable

from kbv.intake.problems import ProblemError
from kbv.intake.sizes import size_constants, with_sizes
from kbv.model.records import Verdict
from kbv.pipeline.verdict import combine_workloads, credited
from kbv.reference.build import ReferenceProblem, build_reference
from kbv.reference.domains import METADATA_NAME
from kbv.reference.workloads import NOMINAL


def verify_workloads(rp: ReferenceProblem, nominal: Verdict, run_one: Callable[[ReferenceProblem], Verdict]) -> Verdict:
    """``nominal`` (the verdict at the problem's own sizes) and, while each is PASS or SHORTCUT, the
    verdict of ``run_one(workload's reference problem)`` for each of ``rp.workloads``, folded into one.

    Raises:
        ProblemError: the reference refuses a declared workload's sizes (the problem's fault: its
            file names a workload its own ``Model`` or ``get_inputs`` cannot build).
    """
    source = Path(rp.ref.path).read_text(encoding="utf-8")
    constants = size_constants(source)
    changed = {k for sizes in rp.workloads.values() for k in sizes}
    runs: list[tuple[str, dict, Verdict]] = [(NOMINAL, {k: v for k, v in constants.items() if k in changed}, nominal)]
    if credited(nominal):
        for name, sizes in rp.workloads.items():
            t0 = time.perf_counter()
            try:
                wrp = build_reference(rp.ref, nominal.config, with_sizes(source, sizes))
                wrp.shape_floors = {k: constants[k] for k, v in sizes.items() if v > constants[k]}
                v = run_one(wrp)
            except ProblemError as exc:  # the reference refuses the workload's sizes, built or run
                raise ProblemError(rp.ref.path, f"{METADATA_NAME}: workload {name!r}: {exc.fault}") from None
            del wrp
            v = dataclasses.replace(v, phase_seconds={**v.phase_seconds, "workload": time.perf_counter() - t0})
            runs.append((name, sizes, v))
            if not credited(v):
                break
    return combine_workloads(runs)


__all__ = ["verify_workloads"]
