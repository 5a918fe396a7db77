"""What each plugin registers, by kind and name (``evo plugins``).

Each provider hook of one plugin is called on its own (its failure is isolated and
reported like any hook failure), so the listing says which plugin brings which
diagnostic, gate, sink or event type. Commands are read from a scratch typer app.
"""

from __future__ import annotations

from typing import Any

# kind -> provider hook whose objects carry a ``name``
PROVIDERS = {
    "domains": "evo_register_domains",
    "diagnostics": "evo_register_diagnostics",
    "gates": "evo_register_gates",
    "proposers": "evo_register_proposers",
    "backtesters": "evo_register_backtesters",
    "interventions": "evo_register_interventions",
}
KINDS = (*PROVIDERS, "sinks", "event_types", "commands")


def _impl(pm: Any, hook: str, plugin: str) -> Any:
    for impl in getattr(pm.pluggy.hook, hook).get_hookimpls():
        if impl.plugin_name == plugin:
            return impl.function
    return None


def _commands(fn: Any) -> list[str]:
    import typer

    app = typer.Typer()
    fn(app=app)
    names = [c.name or getattr(c.callback, "__name__", "?").replace("_", "-") for c in app.registered_commands]
    names += [g.name or "?" for g in app.registered_groups]
    return names


def registrations(pm: Any, plugin: str) -> dict[str, list[str]]:
    """kind -> sorted names that ``plugin`` registers (kinds it registers nothing of are left out)."""
    out: dict[str, list[str]] = {}
    for kind, hook in PROVIDERS.items():
        fn = _impl(pm, hook, plugin)
        if fn is not None:
            out[kind] = sorted({str(getattr(o, "name", o)) for o in (fn() or ())})
    fn = _impl(pm, "evo_sink_names", plugin)
    if fn is not None:
        out["sinks"] = sorted(fn() or ())
    fn = _impl(pm, "evo_register_event_types", plugin)
    if fn is not None:
        out["event_types"] = sorted(getattr(c, "TYPE", c.__name__) for c in (fn() or ()))
    fn = _impl(pm, "evo_register_commands", plugin)
    if fn is not None:
        out["commands"] = sorted(_commands(fn))
    return {k: v for k, v in out.items() if v}
