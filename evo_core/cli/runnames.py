"""Run names on the command line: every command that takes a run id resolves it here
(a full id, a unique prefix, ``@last``/``latest``, ``PREFIX@last``)."""

from __future__ import annotations

from typing import Any

import typer


def run_arg(store: Any, text: str) -> str:
    """The run ``text`` names in ``store``; otherwise one error line and exit 2."""
    from evo_core.cli.app import fail
    from evo_core.store.runs import RunNameError, resolve_run

    try:
        return resolve_run(store, text)
    except RunNameError as exc:
        raise fail(str(exc)) from None


def run_args(store: Any, texts: list[str]) -> list[str]:
    return [run_arg(store, t) for t in texts]


__all__ = ["run_arg", "run_args", "typer"]
