"""Entry point ``evo = swe``: registers the SWE domain with the plugin manager."""

from __future__ import annotations

from evo_core.api import hookimpl


@hookimpl
def evo_register_domains():
    from evo_swe.domain import SWEDomain  # lazy: listing plugins must not start a sandbox

    return [SWEDomain()]


@hookimpl
def evo_register_commands(app):
    from evo_swe.cli import add_grade_command  # lazy: the CLI imports plugins only to build commands

    add_grade_command()
