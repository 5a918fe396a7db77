"""``evo grade NAME``: one verdict as JSON, for debugging reward functions.

The core owns only the command group and its conventions; each domain adds its own
``evo grade NAME`` through ``evo_register_commands`` (see ``grade_command``), so a
third-party domain gets a grade command the same way the shipped ones do.

Exit status: 0 when a verdict was reached (whatever it is); 2 for bad input; 3 when the
grader itself failed (infrastructure error: no verdict).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import typer

INFRA_EXIT = 3

grade_app = typer.Typer(help="Grade one response with a domain's verifier and print the verdict as JSON.", no_args_is_help=True)


def grade_command(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a domain's ``evo grade NAME`` command (call it from ``evo_register_commands``).
    Registering a name again replaces the earlier command, so building the CLI twice is harmless."""
    grade_app.registered_commands[:] = [c for c in grade_app.registered_commands if c.name != name]
    return grade_app.command(name, **kwargs)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    from evo_core.cli.app import fail

    return fail(msg, code)


def text_arg(value: str, what: str) -> str:
    """A literal, ``@path`` for a file, or ``-`` for stdin."""
    # Model output is not guaranteed UTF-8: a file and stdin decode the same bytes the same way.
    if value == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    if value.startswith("@"):
        p = Path(value[1:])
        if not p.is_file():
            raise _fail(f"{what}: no such file: {p}")
        return p.read_bytes().decode("utf-8", errors="replace")
    return value


def _call(fn: Callable[..., dict], **kwargs: Any) -> dict[str, Any]:
    """Bad input (the domain raises ValueError / FileNotFoundError) is a one-line error."""
    try:
        result = fn(**kwargs)
    except ValueError as exc:
        raise _fail(str(exc))
    except (FileNotFoundError, KeyError) as exc:
        raise _fail(f"{type(exc).__name__}: {exc}")
    if not isinstance(result, dict):
        raise _fail(f"{fn.__module__}.grade_cli returned {type(result).__name__}, not a dict", INFRA_EXIT)
    return result


def _emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2, default=str))
    infra = result.get("infra_error")
    if infra:
        from evo_core.cli.app import err

        err.print(f"[bold red]error:[/] no verdict (infrastructure failure): {infra}", highlight=False, soft_wrap=True)
        raise typer.Exit(INFRA_EXIT)


def run_grader(fn: Callable[..., dict], **kwargs: Any) -> None:
    """Call a domain's grader and print its verdict: bad input (ValueError) is a one-line error
    with exit 2, and a verdict the grader could not reach exits 3."""
    _emit(_call(fn, **kwargs))


def register(app: typer.Typer) -> None:
    app.add_typer(grade_app, name="grade")
