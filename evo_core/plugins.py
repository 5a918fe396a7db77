"""A typed facade over pluggy: loads the ``evo`` entry-point group, isolates failures.

``EVO_DISABLE_PLUGINS=name1,name2`` switches named plugins off (entry-point names,
or distribution names). A plugin that raises is recorded as a ``PluginFailure``
(the loop logs it as ``PluginFailed``) and skipped; if it was required, the call
raises ``RequiredPluginFailed`` so the run stops with a clear message.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import traceback
from typing import Any, Callable, Iterable, Mapping, Optional

import attrs
import pluggy

from evo_core import hookspecs
from evo_core.hookspecs import PROJECT

DISABLE_ENV = "EVO_DISABLE_PLUGINS"


class PluginError(RuntimeError):
    """A plugin could not be loaded or registered."""


class RequiredPluginFailed(RuntimeError):
    """A plugin the run cannot do without raised."""

    def __init__(self, failure: "PluginFailure") -> None:
        self.failure = failure
        super().__init__(
            f"required plugin {failure.plugin!r} failed in {failure.hook}: "
            f"{failure.error_type}: {failure.message}"
        )


@attrs.frozen
class PluginFailure:
    plugin: str
    hook: str
    error_type: str
    message: str
    required: bool
    traceback: str = ""


@attrs.frozen
class PluginInfo:
    name: str
    distribution: Optional[str]
    version: Optional[str]
    hooks: tuple[str, ...]
    module: str


def disabled_names() -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {n.strip() for n in raw.split(",") if n.strip()}


class PluginManager:
    def __init__(self, *, load_entrypoints: bool = True, on_failure: Optional[Callable[[PluginFailure], None]] = None) -> None:
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._dists: dict[str, tuple[Optional[str], Optional[str]]] = {}
        self.failures: list[PluginFailure] = []
        self.on_failure = on_failure
        self.load_errors: list[str] = []
        if load_entrypoints:
            self.load_entrypoints()

    @property
    def pluggy(self) -> pluggy.PluginManager:
        return self._pm

    # -- loading ---------------------------------------------------------------------------
    def load_entrypoints(self) -> None:
        off = disabled_names()
        for ep in md.entry_points(group=PROJECT):
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            if ep.name in off or (dist_name and dist_name in off):
                self._pm.set_blocked(ep.name)
                continue
            if self._pm.get_plugin(ep.name) is not None or self._pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
                self._pm.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not take the CLI down
                self.load_errors.append(f"plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
                continue
            self._dists[ep.name] = (dist_name, dist.version if dist is not None else None)
        self._register_event_types()

    def register(self, plugin: Any, name: Optional[str] = None) -> str:
        """Register a module or object (tests use this through the ``evo_plugin`` fixture)."""
        try:
            registered = self._pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"cannot register plugin {name or plugin!r}: {exc}") from exc
        self._register_event_types()
        return registered

    def unregister(self, name: str) -> None:
        self._pm.unregister(name=name)

    def _register_event_types(self) -> None:
        from evo_events.base import register

        for cls in self.collect("evo_register_event_types"):
            if cls.TYPE.startswith("evo.") and cls.__module__.split(".")[0] not in ("evo_events", "evo_core"):
                self.load_errors.append(f"event type {cls.TYPE!r} uses the reserved 'evo.' namespace")
                continue
            register(cls)

    # -- calling ---------------------------------------------------------------------------
    def call(self, hook: str, *, required: Iterable[str] = (), **kwargs: Any) -> list[Any]:
        """Call every implementation of ``hook`` separately; a raising one is recorded and
        skipped, unless its plugin name is in ``required``. Results in pluggy's order."""
        caller = getattr(self._pm.hook, hook)
        required = set(required)
        results = []
        for impl in reversed(caller.get_hookimpls()):  # pluggy calls LIFO / tryfirst first
            args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
            try:
                res = impl.function(**args)
            except Exception as exc:
                failure = PluginFailure(
                    plugin=impl.plugin_name, hook=hook, error_type=type(exc).__name__,
                    message=str(exc)[:2000], required=impl.plugin_name in required,
                    traceback=traceback.format_exc(limit=20),
                )
                self.failures.append(failure)
                if self.on_failure is not None:
                    self.on_failure(failure)
                if failure.required:
                    raise RequiredPluginFailed(failure) from exc
                continue
            if res is not None:
                results.append(res)
        return results

    def collect(self, hook: str, **kwargs: Any) -> list[Any]:
        """Flatten the lists a provider hook returns."""
        out: list[Any] = []
        for res in self.call(hook, **kwargs):
            out.extend(res)
        return out

    def plugin_of(self, hook: str, obj_name: str) -> Optional[str]:
        """Which plugin provides the object called ``obj_name`` through ``hook``."""
        caller = getattr(self._pm.hook, hook)
        for impl in caller.get_hookimpls():
            try:
                for o in impl.function() or ():
                    if getattr(o, "name", None) == obj_name:
                        return impl.plugin_name
            except Exception:
                continue
        return None

    # -- typed providers -------------------------------------------------------------------
    def _by_name(self, hook: str, **kwargs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for obj in self.collect(hook, **kwargs):
            out.setdefault(obj.name, obj)  # the first registered (highest priority) wins
        return out

    def domains(self) -> dict[str, Any]:
        return self._by_name("evo_register_domains")

    def diagnostics(self) -> dict[str, Any]:
        return self._by_name("evo_register_diagnostics")

    def interventions(self) -> dict[str, Any]:
        return self._by_name("evo_register_interventions")

    def proposers(self) -> dict[str, Any]:
        return self._by_name("evo_register_proposers")

    def backtesters(self) -> dict[str, Any]:
        return self._by_name("evo_register_backtesters")

    def gates(self) -> dict[str, Any]:
        return self._by_name("evo_register_gates")

    def sinks(self, config: Mapping[str, Any]) -> list[Any]:
        return self.collect("evo_register_sinks", config=config)

    def domain(self, name: str) -> Any:
        found = self.domains()
        if name not in found:
            have = ", ".join(sorted(found)) or "none"
            raise PluginError(f"no domain {name!r} is installed (installed: {have}); e.g. pip install evo-plugin-{name}")
        return found[name]

    # -- introspection ---------------------------------------------------------------------
    def info(self) -> list[PluginInfo]:
        rows = []
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                continue
            dist, ver = self._dists.get(name, (None, None))
            hooks = tuple(sorted(h.name for h in (self._pm.get_hookcallers(plugin) or [])))
            rows.append(PluginInfo(name, dist, ver, hooks, getattr(plugin, "__name__", type(plugin).__name__)))
        return sorted(rows, key=lambda r: r.name)


_default: Optional[PluginManager] = None


def get_plugin_manager() -> PluginManager:
    """The process-wide manager, loaded once from entry points."""
    global _default
    if _default is None:
        _default = PluginManager()
    return _default
