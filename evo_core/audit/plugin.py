"""Registers the audit tools' event types with the plugin manager (entry point ``evo_audit``)."""

from __future__ import annotations

from evo_core.hookspecs import hookimpl


@hookimpl
def evo_register_event_types():
    from evo_core.audit.events import EVENT_TYPES

    return list(EVENT_TYPES)
