"""The settings of one verification (:class:`EvalConfig`) and the names they choose from. No torch."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

#: correctness policies (``kbv.reference.oracle``): ``kbv`` judges against a float64 oracle with a budget set
#: by the baselines' own errors; ``kbv-compat`` is KernelBench-Verified's allclose rule.
POLICIES: tuple[str, ...] = ("kbv", "kbv-compat")
#: kbv's randomised distributions run by default (``kbv.reference.inputs.DEFAULT_DISTRIBUTIONS``).
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = (
    "fresh", "normal", "sign-flip", "heavy-tail", "wide-range", "outliers", "near-zero", "offset",
    "few-positions", "break-triangular", "break-banded", "break-symmetric", "break-sorted", "break-sparse")
#: KernelBench-Verified's hidden distributions (``kbv.reference.distributions.HIDDEN_DISTRIBUTIONS``
#: holds their scales).
HIDDEN_NAMES: tuple[str, ...] = ("D1", "D2", "D3", "D4")
#: compute-sanitizer's tools that ``--sanitize`` may name, in the order they run.
SANITIZER_TOOLS: tuple[str, ...] = ("memcheck", "racecheck", "initcheck", "synccheck")
_INT_FIELDS = ("nominal_seeds", "warmup", "trials", "timing_rounds", "init_seed", "max_timing_rounds",
               "timing_input_bytes", "held_output_bytes", "secret_shapes")
_REAL_FIELDS = ("atol", "rtol", "compile_timeout_s", "call_timeout_s", "timing_timeout_s", "time_budget_ms",
                "timing_budget_s", "kbv_k", "kbv_floor_eps", "kbv_tf32_floor")
#: the fields a problem's own ``KBV_METADATA["config"]`` may set (kbv.reference.workloads), under
#: the ones the user set (:attr:`EvalConfig.user_set`): tolerance, the kbv policy's budget, seeds
#: and secret shapes. Timing, timeouts and the device stay the user's.
PROBLEM_FIELDS: tuple[str, ...] = ("atol", "rtol", "kbv_k", "kbv_floor_eps", "nominal_seeds", "secret_shapes")
#: tolerances of the allclose sweep kept with every input set (atol = rtol = t), as keys.
SWEEP_KEYS: tuple[str, ...] = ("1e-02", "1e-03", "1e-04")


@dataclass(frozen=True)
class EvalConfig:
    """Fully resolved settings of one verification, stored with every result (and part of a batch
    store's identity: one store holds one config). Frozen; construction checks the values.

    Fields (defaults are ``kbv eval``'s):
        device: ``"cpu"`` or ``"cuda"`` (default ``"cpu"``; ``kbv.make_config`` picks cuda when available).
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"``: dtype of both models and of the
            floating-point inputs (integer inputs keep theirs).
        nominal_seeds: nominal input sets, each ``get_inputs()`` under a fresh secret seed (>= 1).
        hidden: KernelBench-Verified's hidden distributions to check (``D1``-``D4``: inputs x1,
            x3, x0.01, x-1).
        atol, rtol: ``allclose`` tolerances of the ``kbv-compat`` policy and of the recorded
            allclose verdicts (KernelBench-Verified: 1e-3 for fp32, 1e-2 for bf16/fp16; see
            :meth:`default_tolerance`).
        warmup: untimed calls before each timing round.
        trials: timed calls per subject in all (>= 1), split over ``timing_rounds`` interleaved
            rounds; rounds after the first are cut by ``time_budget_ms``.
        timing_rounds: interleaved rounds of candidate and baselines (>= 1).
        init_seed: ``torch.manual_seed`` before both constructors (KernelBench's 42).
        baselines: baselines timed beside the candidate (``eager-fp32``, ``eager-tf32``,
            ``eager-fp32-cudnn-tf32``; ``kbv.sandbox.numeric_flags``).
        compile_timeout_s: seconds allowed to import and build ``ModelNew`` (extension builds).
        call_timeout_s: seconds allowed per checked forward call.
        timing_timeout_s: seconds allowed per timing round.
        time_budget_ms: milliseconds of calls per subject in a round after the first (>= 0; 0: no cap).
        interval_half_width: the adaptive stop's target (:mod:`kbv.pipeline.adaptive`): after the
            planned rounds, more rounds run until every speedup's 95 % interval spans at most
            ± this fraction of the speedup (0: the planned rounds only; None, the default: 0.05 on
            cuda, 0 on cpu).
        max_timing_rounds: rounds at most with the adaptive stop, the planned ones included (>= 1).
        timing_budget_s: seconds of timing rounds after which the adaptive stop starts no round
            (>= 0; 0: no limit but ``max_timing_rounds``).
        policy: ``"kbv"`` (float64 oracle, budget from the baselines' own errors) or
            ``"kbv-compat"`` (``allclose`` on nominal + D1-D4); decides ``passed``.
        distributions: kbv's secret randomised distributions (``kbv.reference.inputs.DISTRIBUTIONS``);
            ``()`` for none, as ``kbv-compat`` runs.
        kbv_k, kbv_floor_eps, kbv_tf32_floor: the ``kbv`` policy's budget: candidate error <=
            kbv_k x max(baseline errors) + kbv_floor_eps x eps(float32) (+ kbv_tf32_floor where TF32
            is in play); docs/correctness.md.
        integrity: run the anti-cheat detectors (only off to measure their cost).
        timing_input_bytes: cap in bytes on what the timing phase's input sets take together, each
            counted three times (kbv's copy, the staging copy, the candidate's); 0 (default): a
            quarter of free device memory on cuda, of available host memory (at most 1 GiB) on cpu
            (``kbv.pipeline.timing_rounds.TIMING_INPUT_MEMORY_FRACTION``). There are always two sets at
            least, four at most: a small cap puts a small problem on a big one's path (two sets).
        held_output_bytes: bytes of earlier timed calls' outputs the candidate worker keeps alive
            between calls (``kbv.sandbox.timed``: an output handed out again from a pool overlaps one
            still held); the previous call's output is held whatever its size. Default 128 MiB,
            part of the memory bound's 1 GiB term (``kbv.processes.footprint``).
        user_set: the fields the user set (``kbv eval``/``kbv run`` options given, the keys of a
            config mapping, :func:`kbv.api.make_config`): a problem's own settings
            (:meth:`with_problem`) never change them. Layers: kbv's defaults, then the problem file,
            then the user.

    Raises:
        TypeError: a count that is not an int, a tolerance, timeout or budget that is not a real
            number, names that are not a tuple of strings (the message names the field).
        ValueError: a value out of range (device, precision, policy, an unknown hidden
            distribution, negative or non-finite tolerances, counts, budgets, timeouts).
    """

    device: str = "cpu"
    precision: str = "fp32"  #: ``fp32`` | ``bf16`` | ``fp16``: dtype of models and float inputs.
    nominal_seeds: int = 3  #: nominal input sets (``get_inputs()`` under fresh seeds).
    hidden: tuple[str, ...] = ("D1", "D2", "D3", "D4")
    atol: float = 1e-3  #: KernelBench-Verified: 1e-3 for fp32, 1e-2 for bf16/fp16.
    rtol: float = 1e-3
    warmup: int = 5
    trials: int = 30
    timing_rounds: int = 3  #: trials are split into interleaved rounds (candidate, baselines).
    init_seed: int = 42  #: KernelBench's ``torch.manual_seed(42)`` before both constructors.
    baselines: tuple[str, ...] = ("eager-fp32", "eager-tf32")
    compile_timeout_s: float = 900.0
    call_timeout_s: float = 120.0
    timing_timeout_s: float = 600.0
    #: cap (ms) on the timed calls of one subject in one round: after the first round a round's
    #: calls are cut to budget / the slowest subject's median so far, never below 3 and the same
    #: for every subject; the sync pass is sized the same way (``kbv.pipeline.timing_rounds.trials_within_budget``).
    #: 0 for no cap.
    time_budget_ms: float = 2000.0
    #: adaptive stop: further rounds until each speedup's 95 % interval spans at most ± this
    #: fraction of it. None: 0.05 on cuda (kbv choice: a quoted 1.50x is then within 1.43-1.58x;
    #: launch-bound kernels need the extra rounds), 0 on cpu, where kbv's timing serves development
    #: machines whose load keeps the interval from narrowing (a loaded 2-core machine ran to the
    #: round cap on a ReLU: +3-4 s a verification for no quotable figure).
    interval_half_width: float | None = None
    #: rounds at most under the adaptive stop (4x the planned 3: the interval narrows about as
    #: 1/sqrt(calls), so a planned width of 0.1 gets to 0.05).
    max_timing_rounds: int = 12
    #: seconds of timing rounds after which no further round starts (kbv choice: a verification's
    #: timing stays within half a minute whatever the kernel).
    timing_budget_s: float = 30.0
    #: correctness policy deciding ``passed`` (``kbv`` or ``kbv-compat``, see ``kbv.reference.oracle``).
    policy: str = "kbv"
    #: kbv's secret randomised distributions to run (``kbv.reference.inputs.DISTRIBUTIONS``); ``()`` for none.
    distributions: tuple[str, ...] = DEFAULT_DISTRIBUTIONS
    #: ``kbv`` policy: candidate error <= kbv_k * max(baseline errors) + kbv_floor_eps * eps(float32)
    #: (+ kbv_tf32_floor where the eager-tf32 baseline shows TF32 in play); docs/correctness.md.
    kbv_k: float = 16.0
    kbv_floor_eps: float = 8.0
    kbv_tf32_floor: float = 2.0 ** -10
    #: run the anti-cheat detectors (static scan and runtime probes, ``kbv.sandbox.call_probes``). Off only
    #: to measure their cost (``bench/probe_overhead.py``): a verdict without them can be gamed.
    integrity: bool = True
    #: cap on the timing input sets' bytes (each counted 3 times); 0: from free memory
    #: (``kbv.pipeline.timing_rounds.Timing._timing_sets``).
    timing_input_bytes: int = 0
    #: bytes of earlier timed calls' outputs held between calls (``kbv.sandbox.timed.HOLD_CALLS``).
    held_output_bytes: int = 128 << 20
    #: input sets judged at a secret shape (the problem's size constants changed, ``kbv.reference.shapes``);
    #: 0: none (``kbv-compat``, KernelBench-Verified's protocol, runs none by default).
    secret_shapes: int = 1
    #: compute-sanitizer tools run over one forward (``memcheck``, ``racecheck``, ``initcheck``,
    #: ``synccheck``; cuda only, :mod:`kbv.pipeline.diagnostics`); empty: none.
    sanitize: tuple[str, ...] = ()
    #: Nsight Compute figures of the candidate's and the reference's kernels (cuda only).
    ncu_profile: bool = False
    user_set: tuple[str, ...] = ()

    def with_problem(self, settings: Mapping[str, Any] | None) -> tuple["EvalConfig", dict[str, Any]]:
        """This config under a problem's own ``settings`` (its ``KBV_METADATA["config"]``): each
        field of :data:`PROBLEM_FIELDS` the user did not set (:attr:`user_set`) takes the problem's
        value. Returns the resolved config and the settings applied.

        Raises:
            ValueError: ``settings`` is not a dict, names a field outside :data:`PROBLEM_FIELDS`,
                or a value EvalConfig refuses (the message names the field).
            TypeError: a value of the wrong type (EvalConfig's own checks).
        """
        if not settings:
            return self, {}
        if not isinstance(settings, Mapping):
            raise ValueError(f"'config' must be a dict of field -> value, not {type(settings).__name__}")
        unknown = sorted(str(k) for k in settings if k not in PROBLEM_FIELDS)
        if unknown:
            raise ValueError(f"'config' sets {', '.join(map(repr, unknown))}; a problem may set {', '.join(PROBLEM_FIELDS)}")
        applied = {k: v for k, v in settings.items() if k not in self.user_set}
        return (dataclasses.replace(self, **applied) if applied else self), applied

    def _check_types(self) -> None:
        for name in _INT_FIELDS:
            v = getattr(self, name)
            if type(v) is not int:
                raise TypeError(f"EvalConfig.{name} must be an int, not {type(v).__name__} {v!r}")
        for name in _REAL_FIELDS:
            v = getattr(self, name)
            if type(v) not in (int, float):
                raise TypeError(f"EvalConfig.{name} must be a number, not {type(v).__name__} {v!r}")
        for name in ("hidden", "baselines", "distributions", "user_set", "sanitize"):
            v = getattr(self, name)
            if type(v) is not tuple or not all(type(x) is str for x in v):
                raise TypeError(f"EvalConfig.{name} must be a tuple of names, not {v!r}")

    def __post_init__(self) -> None:
        self._check_types()
        unknown = [h for h in self.hidden if h not in HIDDEN_NAMES]
        if unknown:
            raise ValueError(f"unknown hidden distribution(s) {unknown}; known: {list(HIDDEN_NAMES)}")
        if not all(math.isfinite(v) and v >= 0 for v in (self.atol, self.rtol)):
            raise ValueError(f"atol and rtol must be finite and >= 0, not {self.atol!r}, {self.rtol!r}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, not {self.warmup!r}")
        if not all(math.isfinite(v) and v > 0 for v in (self.compile_timeout_s, self.call_timeout_s,
                                                        self.timing_timeout_s)):
            raise ValueError("compile_timeout_s, call_timeout_s and timing_timeout_s must be finite and > 0")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if not (self.kbv_k >= 1 and math.isfinite(self.kbv_k)) or not (0 <= self.kbv_floor_eps < math.inf) \
                or not (0 <= self.kbv_tf32_floor < math.inf):
            raise ValueError("kbv_k must be finite and >= 1, kbv_floor_eps and kbv_tf32_floor finite and >= 0")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, not {self.device!r}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, not {self.precision!r}")
        for name in ("nominal_seeds", "trials", "timing_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)!r}")
        unknown_set = [n for n in self.user_set if n not in _FIELD_NAMES]
        if unknown_set:
            raise ValueError(f"user_set names no EvalConfig field: {unknown_set}")
        if not 0 <= self.secret_shapes <= 8:
            raise ValueError(f"secret_shapes must be in 0..8, not {self.secret_shapes!r}")
        bad_tools = [t for t in self.sanitize if t not in SANITIZER_TOOLS]
        if bad_tools:
            raise ValueError(f"sanitize names unknown tool(s) {bad_tools}; known: {list(SANITIZER_TOOLS)}")
        if type(self.ncu_profile) is not bool:
            raise TypeError(f"EvalConfig.ncu_profile must be a bool, not {self.ncu_profile!r}")
        if self.timing_input_bytes < 0:
            raise ValueError(f"timing_input_bytes must be >= 0, not {self.timing_input_bytes!r}")
        if not 0 <= self.held_output_bytes <= 1 << 30:
            raise ValueError(f"held_output_bytes must be in [0, 1 GiB], not {self.held_output_bytes!r}")
        if not (math.isfinite(self.time_budget_ms) and self.time_budget_ms >= 0):
            raise ValueError(f"time_budget_ms must be finite and >= 0, not {self.time_budget_ms!r}")
        if not (self.interval_half_width is None or 0 <= self.interval_half_width < 1) or self.max_timing_rounds < 1 \
                or not (math.isfinite(self.timing_budget_s) and self.timing_budget_s >= 0):
            raise ValueError("interval_half_width must be None or in [0, 1), max_timing_rounds >= 1 and "
                             "timing_budget_s finite and >= 0")

    @property
    def interval_target(self) -> float:
        """The adaptive stop's target in force: ``interval_half_width``, or its device default."""
        if self.interval_half_width is not None:
            return float(self.interval_half_width)
        return 0.05 if self.device == "cuda" else 0.0

    @staticmethod
    def default_tolerance(precision: str) -> float:
        """atol = rtol of the KernelBench-Verified protocol: 1e-3 for fp32, 1e-2 for bf16/fp16."""
        return 1e-3 if precision == "fp32" else 1e-2


#: every field name of :class:`EvalConfig` (what :attr:`EvalConfig.user_set` may name).
_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(EvalConfig))
