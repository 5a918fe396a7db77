"""The ``evo`` command line (typer + rich).

Commands live in small modules under ``evo_core.cli``; each has ``register(app)``.
Plugins add their own through ``evo_register_commands``. Errors print one line,
unless ``--debug`` is given.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(
    name="evo",
    help="EvoTrainer: RL for LLM policies with a co-evolving, auditable harness.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

COMMAND_MODULES = (
    "evo_core.cli.store_cmds",  # runs, log, checkout, diff, verify
    "evo_core.cli.plugin_cmds",  # plugins, plugin new
    "evo_core.cli.run_cmds",  # run
    "evo_core.cli.serve_cmds",  # serve
    "evo_core.cli.grade_cmds",  # grade math|code|swe
    "evo_core.cli.harness_cmds",  # skills
    "evo_core.cli.audit_cmds",  # audit, replay, report, tail
    "evo_core.cli.export_cmds",  # export
    "evo_core.cli.config_cmds",  # config list, config show
)

_DEBUG = False


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors.")) -> None:
    global _DEBUG
    _DEBUG = debug or _DEBUG


def _register_all() -> None:
    for mod_name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            if exc.name == mod_name:
                continue  # that command group is not part of this build
            raise
        mod.register(app)
    if os.environ.get("EVO_NO_PLUGIN_COMMANDS") != "1":
        from evo_core.plugins import get_plugin_manager

        get_plugin_manager().register_commands(app)


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print one clear error line and return the Exit to raise."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _logs_to_stderr() -> None:
    # Commands print JSON on stdout; structured logs must never mix into it.
    import logging

    import structlog

    level = getattr(logging, os.environ.get("EVO_LOG_LEVEL", "INFO").upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def main(argv: Optional[list[str]] = None) -> None:
    global _DEBUG
    args = sys.argv[1:] if argv is None else argv
    _DEBUG = "--debug" in args
    _logs_to_stderr()
    _register_all()
    try:
        rc = app(args=args, standalone_mode=False)
        # With standalone_mode=False click *returns* the code of a typer.Exit instead of raising.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # every error is one line unless --debug
        if _DEBUG:
            raise
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        err.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
