"""The ``evo`` command line (typer + rich).

Commands live in small modules under ``evo_core.cli``; each has ``register(app)``.
Plugins add their own through ``evo_register_commands``. Errors print one line,
unless ``--debug`` is given; usage errors (a bad flag, a missing argument, an unknown
command) exit 2 with the usage line and a ``Try 'evo CMD --help'`` hint.
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
    add_completion=True,  # --install-completion / --show-completion; `evo completion SHELL` prints a script
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
    "evo_core.cli.completion_cmds",  # completion
)

_DEBUG = False


def distribution_version() -> str:
    import importlib.metadata as md

    try:
        return md.version("evotrainer")
    except md.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evo (evotrainer) {distribution_version()}")
        raise typer.Exit(0)


def _log_format(value: Optional[str]) -> Optional[str]:
    # applied before any command runs; commands that reconfigure logging read the env var
    if value is not None:
        from evo_core.logformat import LogFormatError, configure, log_format

        try:
            os.environ["EVO_LOG_FORMAT"] = log_format(value)
        except LogFormatError as exc:
            raise typer.BadParameter(str(exc)) from None
        configure()
    return value


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the evotrainer version and exit."),
    log_format: Optional[str] = typer.Option(None, "--log-format", callback=_log_format, metavar="console|json",
                                             help="Log lines on stderr as key=value text or JSON (default: $EVO_LOG_FORMAT or console)."),
) -> None:
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
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _logs_to_stderr() -> None:
    # Commands print JSON on stdout; structured logs must never mix into it.
    from evo_core.logformat import LogFormatError, configure

    try:
        configure()
    except LogFormatError as exc:  # a bad $EVO_LOG_FORMAT: said once, before any command runs
        raise fail(str(exc)) from None


def _click_classes(name: str) -> tuple[type, ...]:
    """``name`` from every click in play: typer >= 0.2x runs on its own vendored click
    (``typer._click``), so ``click.exceptions.UsageError`` alone never matches its errors."""
    found: list[type] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def main(argv: Optional[list[str]] = None) -> None:
    global _DEBUG
    args = sys.argv[1:] if argv is None else argv
    _DEBUG = "--debug" in args
    try:
        _logs_to_stderr()
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    _register_all()
    try:
        rc = app(args=args, prog_name="evo", standalone_mode=False)  # "evo" in usage lines, even under `python -c`
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
        from evo_core.store.records import CorruptRecord

        if isinstance(exc, CorruptRecord):  # a damaged log: which event, and `evo verify`
            fail(exc.user_line())
            sys.exit(2)
        if isinstance(exc, _click_classes("UsageError")):
            exc.show()  # "Usage: evo run [OPTIONS] CONFIG" / "Try 'evo run --help' for help." / "Error: ..."
            sys.exit(2)
        if isinstance(exc, _click_classes("ClickException")):
            exc.show()
            sys.exit(exc.exit_code)
        err.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
