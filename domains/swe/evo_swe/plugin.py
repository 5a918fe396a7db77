"""Entry point ``evo = swe``: registers the SWE domain with the plugin manager."""

from __future__ import annotations

from evo_core.hookspecs import hookimpl


@hookimpl
def evo_register_domains():
    from evo_swe.domain import SWEDomain  # lazy: listing plugins must not start a sandbox

    return [SWEDomain()]
