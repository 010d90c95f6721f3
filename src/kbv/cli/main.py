"""The ``kbv`` command (typer): the app, its commands registered from :mod:`kbv.cli.verify`,
:mod:`kbv.cli.batch`, :mod:`kbv.cli.generate` and :mod:`kbv.cli.serve`, and :func:`main`, the console entry point.
Exit codes: :mod:`kbv.cli.common`."""

from __future__ import annotations

import sys

import typer

from kbv import __version__
from kbv.cli.batch import baselines_cmd, report_cmd, run_cmd
from kbv.cli.common import Command, Group, console, err_console
from kbv.cli.generate import audit_cmd, dataset_cmd, generate_cmd, refine_cmd
from kbv.cli.serve import serve_cmd
from kbv.cli.verify import demo_cmd, eval_cmd, profile_cmd, vet_cmd

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=Group,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="kbv — KernelBench-Verified: honest verdicts on generated GPU kernels.")


def _print_version(value: bool) -> None:
    if value:
        print(f"kbv {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_print_version,
                                       help="Print kbv's version and exit.")) -> None:
    """kbv — KernelBench-Verified: honest verdicts on generated GPU kernels."""


def version_cmd() -> None:
    """Print kbv's version."""
    console.print(f"kbv {__version__}")


def _summary(fn) -> str:
    """The first paragraph of ``fn``'s docstring on one line: the command list of ``kbv --help``
    (the docstring's own line breaks made it ragged there)."""
    return " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())


# in the order of ``kbv --help``
for _name, _fn in (("eval", eval_cmd), ("profile", profile_cmd), ("vet", vet_cmd), ("demo", demo_cmd), ("run", run_cmd),
                   ("report", report_cmd), ("baselines", baselines_cmd), ("version", version_cmd),
                   ("generate", generate_cmd), ("refine", refine_cmd), ("audit", audit_cmd),
                   ("dataset", dataset_cmd), ("serve", serve_cmd)):
    app.command(_name, cls=Command, short_help=_summary(_fn))(_fn)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("kbv: interrupted")
        sys.exit(130)
