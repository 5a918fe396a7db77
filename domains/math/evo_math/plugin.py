"""Entry point (group ``evo``): registers the math domain."""

from __future__ import annotations

from evo_core.api import hookimpl


@hookimpl
def evo_register_domains():
    from evo_math.domain import MathDomain

    return [MathDomain()]


@hookimpl
def evo_register_commands(app):
    from evo_math.cli import add_grade_command  # lazy: the CLI imports plugins only to build commands

    add_grade_command()
