"""What every kbv command shares: the typer command classes, the consoles, :func:`fail` (exit
code 2 with one line on stderr), the device and precision options and the config they make.

Exit codes of every command: 0 the command ran (whatever the verdicts), 2 bad usage or a bad
problem/candidate file (one line on stderr naming the file and the fault), 3 kbv itself failed.
"""

from __future__ import annotations

import os
from enum import Enum

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

try:  # typer 0.2x carries its own click
    from typer._click import exceptions as _click
except ImportError:  # an older typer runs on click itself
    from click import exceptions as _click
#: Click's Abort (Ctrl-C at a prompt), which typer 0.29's own click does not define
_ABORT = getattr(_click, "Abort", None) or type("_NoAbort", (Exception,), {})


def _no_bool_metavar(params: list) -> list:
    """Flags take no value: show none in help (typer would print ``<bool>``)."""
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class Command(TyperCommand):
    def get_params(self, ctx):  # noqa: D102 - see _no_bool_metavar
        return _no_bool_metavar(super().get_params(ctx))


class Group(TyperGroup):
    command_class = Command

    def get_params(self, ctx):  # noqa: D102 - see _no_bool_metavar
        return _no_bool_metavar(super().get_params(ctx))

    def invoke(self, ctx):  # noqa: D102 - Ctrl-C: one line (typer ends it silently with 130)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err_console.print("kbv: interrupted", highlight=False)
            raise typer.Exit(130) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """As typer's, except that a bad option value, an unknown option or a missing argument is
        one line on stderr (``kbv: error: ...``, exit 2) instead of typer's framed box (six lines
        for ``--device gpu``). Help for a command given no arguments is still printed whole."""
        import sys

        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        except BrokenPipeError:  # stdout closed early (a pipe into head): quiet, as other tools are
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)  # 128 + SIGPIPE
        except _click.NoArgsIsHelpError as exc:
            help_text = exc.ctx.get_help()  # typer's rich help prints itself and returns ""
            if help_text:
                print(help_text)
            sys.exit(0)
        except _click.UsageError as exc:
            where = f" (see {exc.ctx.command_path if exc.ctx is not None else 'kbv'} --help)"
            err_console.print(f"kbv: error: {usage_message(exc)}{where}", highlight=False, soft_wrap=True,
                              markup=False)
            sys.exit(exc.exit_code)
        except _click.ClickException as exc:
            err_console.print(f"kbv: error: {exc.format_message()}", highlight=False, soft_wrap=True, markup=False)
            sys.exit(exc.exit_code)
        except _ABORT:
            err_console.print("kbv: aborted", highlight=False)
            sys.exit(1)
        except OSError as exc:  # a path the user gave that cannot be written or read: their fault, named
            if os.environ.get("KBV_TRACEBACK"):
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            err_console.print(f"kbv: error: {where}{exc.strerror or exc}", highlight=False, soft_wrap=True,
                              markup=False)
            sys.exit(2)
        except Exception as exc:  # kbv's own failure: one line, exit 3 (KBV_TRACEBACK=1 shows the traceback)
            if os.environ.get("KBV_TRACEBACK"):
                raise
            message = " ".join(str(exc).split()) or "no message"
            err_console.print(f"kbv: internal error: {type(exc).__name__}: {message} (KBV_TRACEBACK=1 shows "
                              "where)", highlight=False, soft_wrap=True, markup=False)
            sys.exit(3)
        sys.exit(code if isinstance(code, int) else 0)


def usage_message(exc) -> str:
    """Click's message of a usage error on one line, without its closing full stop or the
    ``Value error, `` that typer's validation puts before a bad choice."""
    return " ".join(exc.format_message().replace("Value error, ", "").split()).rstrip(".")


class _Console(Console):
    """rich's console, ending with exit 141 (128 + SIGPIPE) where a closed stdout would end it
    with 1: a pipe into ``head`` is not a failure of kbv's (README: exit codes)."""

    def on_broken_pipe(self) -> None:
        import sys

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141)


console = _Console() if Console().is_terminal else _Console(width=140)


err_console = Console(stderr=True)


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"kbv: error: {message}", highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)


def resolve_device(device: Device, option: str = "--device cuda") -> str:
    """The device a command runs on; ``option``: how the user asked for cuda (named in the error)."""
    import torch

    if device is Device.auto:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device is Device.cuda and not torch.cuda.is_available():
        fail(f"{option}: CUDA is not available on this machine (torch "
             f"{torch.__version__}); use --device cpu")
    return device.value


class Policy(str, Enum):
    kbv = "kbv"
    kbv_compat = "kbv-compat"


POLICY_HELP = ("Correctness policy: kbv (fp64 oracle, budget from the baselines' own errors, randomised "
               "distributions) or kbv-compat (KernelBench-Verified: allclose 1e-3 on nominal + D1-D4).")


#: the help of --seeds wherever it appears: one meaning everywhere.
SEEDS_HELP = ("Nominal input sets per evaluation, each under a fresh secret seed (default 3, or the problem's "
              "own KBV_METADATA config).")


#: ``--seeds`` when not given.
DEFAULT_SEEDS = 3


def make_config(device: str, precision: str, seeds: int | None, trials: int, warmup: int, timeout: float | None,
                policy: str = "kbv", secret_shapes: int | None = None, sanitize: tuple[str, ...] = (),
                ncu_profile: bool = False):
    """The resolved config. ``kbv-compat`` is the KernelBench-Verified protocol: nominal + D1–D4
    judged by allclose, without kbv's randomised distributions or a secret shape (unless
    ``secret_shapes`` is given). ``seeds`` None: :data:`DEFAULT_SEEDS`, or the problem's own
    ``KBV_METADATA["config"]``; options given are ``user_set`` (the problem does not change them)."""
    from kbv.model.records import EvalConfig

    tol = EvalConfig.default_tolerance(precision)
    given = {"nominal_seeds"} if seeds is not None else set()
    kw = dict(device=device, precision=precision, nominal_seeds=DEFAULT_SEEDS if seeds is None else seeds,
              trials=trials, warmup=warmup, atol=tol, rtol=tol, policy=policy)
    if policy == "kbv-compat":
        kw["distributions"] = ()
        kw["secret_shapes"] = 0
        given.add("secret_shapes")
    if secret_shapes is not None:
        kw["secret_shapes"] = secret_shapes
        given.add("secret_shapes")
    kw["user_set"] = tuple(sorted(given))
    kw.update(sanitize=tuple(sanitize), ncu_profile=ncu_profile)
    if timeout is not None:
        kw.update(call_timeout_s=timeout, timing_timeout_s=max(timeout, 60.0))
    try:
        return EvalConfig(**kw)
    except ValueError as exc:
        fail(str(exc))


SANITIZE_HELP = ("compute-sanitizer tools to run over the candidate's forward on one input set, in kbv's "
                 "sandbox, comma-separated: memcheck, racecheck, initcheck, synccheck (cuda only). A memory "
                 "access error is INCORRECT; the others are warnings.")
PROFILE_HELP = ("Nsight Compute figures (duration, SM and DRAM throughput, occupancy, registers, shared memory, "
                "top stalls) of the candidate's kernels and the reference's, in the verdict (cuda only).")


def diagnostics_options(device: str, sanitize: str | None, profile: bool) -> tuple[tuple[str, ...], bool]:
    """``--sanitize`` and ``--profile`` as config values: the tools in their order, and whether to
    profile. On cpu each says "not applicable on cpu" on stderr and the run goes on; the values stay
    in the config, so the record shows what was asked (``evidence["diagnostics"]`` says it did not
    apply). Exits 2 on a tool name outside the list."""
    from kbv.checks.sanitizer_rules import parse_tools

    tools: tuple[str, ...] = ()
    if sanitize is not None:
        try:
            tools = parse_tools(sanitize)
        except ValueError as exc:
            fail(str(exc))
    if device == "cpu":
        for given, name in ((tools, "--sanitize"), (profile, "--profile")):
            if given:
                err_console.print(f"kbv: {name}: not applicable on cpu (a CUDA tool); going on without it",
                                  highlight=False)
    return tools, profile


SHAPES_HELP = ("Input sets judged at a secret shape: the problem's size constants changed to secret odd sizes "
               "(default 1; 0 under kbv-compat; 0: none).")


def writable_output(path, option: str) -> None:
    """Fail (exit 2, one line) before any work when ``path`` cannot be written: a directory, or a
    file that cannot be opened for appending (its folders are made as the write would make them; a
    file made here is removed again)."""
    from pathlib import Path

    path = Path(path)
    if path.is_dir():
        fail(f"{option} {path}: is a directory; give a file path")
    existed = path.exists()
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        fail(f"{option} {path}: {ancestor} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{option} {path}: cannot be written ({exc.strerror or exc})")
    if ancestor != path.parent:  # a typo in a folder name should not pass unseen (said once it is made)
        err_console.print(f"kbv: note: {option} made the folder {path.parent}", highlight=False, soft_wrap=True,
                          markup=False)
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        fail(f"{option} {path}: cannot be written ({exc.strerror or exc})")
    if not existed:
        path.unlink(missing_ok=True)
