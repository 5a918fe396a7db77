"""A typed facade over pluggy: loads the ``evo`` entry-point group, isolates failures.

Every hook has a typed method here (``pm.gates()``, ``pm.on_events(...)``, …), and every
call goes through pluggy's own calling loop, so hook wrappers and ``tryfirst``/``trylast``
work. Isolation is per implementation: each registered hook function is wrapped so that one
that raises is recorded as a ``PluginFailure`` (the run logs it as ``PluginFailed``) and
skipped, unless its plugin is required for the call, in which case ``RequiredPluginFailed``
stops the run with a clear message.

``EVO_DISABLE_PLUGINS=name1,name2`` switches named plugins off (entry-point names, or
distribution names). A plugin that fails to load is kept in ``load_failures``: the CLI shows
it, and a run logs it as ``PluginFailed`` before anything trains.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata as md
import os
import traceback
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence

import attrs
import pluggy

from evo_core import hookspecs
from evo_core.hookspecs import PROJECT
from evo_events import Emitter, PluginFailed

if TYPE_CHECKING:
    from evo_core.api.domain import Domain
    from evo_core.api.evidence import Diagnostic
    from evo_core.api.harness import Backtester, Gate, Proposer
    from evo_core.api.interventions import Intervention
    from evo_core.api.trainer import Sink

DISABLE_ENV = "EVO_DISABLE_PLUGINS"
_REQUIRED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("evo_required_plugins", default=frozenset())


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
    required: bool = False
    traceback: str = ""

    @classmethod
    def of(cls, plugin: str, hook: str, exc: BaseException, tb: str = "", required: bool = False) -> "PluginFailure":
        return cls(plugin, hook, type(exc).__name__, (str(exc) or tb or type(exc).__name__)[:2000], required, tb)

    def to_event(self, run_id: str, step: Optional[int], emitted_by: Emitter) -> PluginFailed:
        """The one place a ``PluginFailed`` event is built."""
        return PluginFailed(run_id=run_id, plugin=self.plugin, hook=self.hook, error_type=self.error_type,
                            message=self.message[:2000], required=self.required, step=step, emitted_by=emitted_by)


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
        self._sinks: list[list[PluginFailure]] = []
        self.failures: list[PluginFailure] = []  # every failure of this manager's lifetime
        self.on_failure = on_failure
        self.load_failures: list[PluginFailure] = []
        if load_entrypoints:
            self.load_entrypoints()

    @property
    def pluggy(self) -> pluggy.PluginManager:
        return self._pm

    @property
    def load_errors(self) -> list[str]:
        return [f"plugin {f.plugin!r} failed to load: {f.error_type}: {f.message}" for f in self.load_failures]

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
                self.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not take the CLI down
                self.load_failures.append(PluginFailure.of(ep.name, f"load {ep.value}", exc,
                                                           traceback.format_exc(limit=5)))
                continue
            self._dists[ep.name] = (dist_name, dist.version if dist is not None else None)
        try:  # register() refuses unknown hooks one by one; this is pluggy's word on all of them
            self.check_pending()
        except PluginError as exc:
            self.load_failures.append(PluginFailure("?", "check_pending", "PluginValidationError", str(exc)))

    def register(self, plugin: Any, name: Optional[str] = None) -> str:
        """Register a module or object (tests use this through the ``evo_plugin`` fixture)."""
        try:
            registered = self._pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"cannot register plugin {name or plugin!r}: {exc}") from exc
        if registered is None:
            raise PluginError(f"plugin {name or plugin!r} is blocked ({DISABLE_ENV})")
        unknown = self.unknown_hooks(registered)
        if unknown:  # a misspelt hook would otherwise be silently never called
            self._pm.unregister(name=registered)
            raise PluginError(f"plugin {registered!r} implements unknown hook(s): "
                              + "; ".join(_unknown_hook_line(h) for h in unknown))
        for caller in self._pm.get_hookcallers(self._pm.get_plugin(registered)) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin_name == registered and not (impl.hookwrapper or impl.wrapper) \
                        and not getattr(impl.function, "_evo_isolated", False):
                    impl.function = self._isolated(impl.function, registered, caller.name)
        self._register_event_types()
        return registered

    def unknown_hooks(self, plugin: Optional[str] = None) -> list[str]:
        """Hook implementations (of ``plugin``, or of any plugin) that no hookspec declares."""
        out = []
        for hook, caller in vars(self._pm.hook).items():
            if getattr(caller, "spec", None) is None and hasattr(caller, "get_hookimpls"):
                if any(plugin is None or i.plugin_name == plugin for i in caller.get_hookimpls()):
                    out.append(hook)
        return sorted(out)

    def check_pending(self) -> None:
        """pluggy's own check that every hook implementation has a spec (``PluginError`` if not)."""
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from None

    def unregister(self, name: str) -> None:
        self._pm.unregister(name=name)

    def _isolated(self, fn: Callable[..., Any], plugin: str, hook: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                required = plugin in _REQUIRED.get()
                failure = PluginFailure.of(plugin, hook, exc, traceback.format_exc(limit=20), required)
                self._record(failure)
                if required:
                    raise RequiredPluginFailed(failure) from exc
                return None

        call._evo_isolated = True  # type: ignore[attr-defined]
        return call

    def _record(self, failure: PluginFailure) -> None:
        self.failures.append(failure)
        for sink in self._sinks:
            sink.append(failure)
        if self.on_failure is not None:
            self.on_failure(failure)

    @contextlib.contextmanager
    def capture_failures(self) -> Iterator[list[PluginFailure]]:
        """The failures recorded while the block runs (what a step turns into events)."""
        sink: list[PluginFailure] = []
        self._sinks.append(sink)
        try:
            yield sink
        finally:
            self._sinks.remove(sink)

    @contextlib.contextmanager
    def requiring(self, plugins: Sequence[str]) -> Iterator[None]:
        """Within the block, a failure of one of ``plugins`` raises ``RequiredPluginFailed``."""
        token = _REQUIRED.set(_REQUIRED.get() | frozenset(plugins))
        try:
            yield
        finally:
            _REQUIRED.reset(token)

    def _register_event_types(self) -> None:
        from evo_events.base import register

        for cls in self._collect(self._pm.hook.evo_register_event_types()):
            if cls.TYPE.startswith("evo.") and cls.__module__.split(".")[0] not in ("evo_events", "evo_core"):
                self.load_failures.append(PluginFailure("?", "evo_register_event_types", "ReservedNamespace",
                                                        f"event type {cls.TYPE!r} uses the reserved 'evo.' namespace"))
                continue
            register(cls)

    # -- providers -------------------------------------------------------------------------
    @staticmethod
    def _collect(results: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for res in results:
            out.extend(res or ())
        return out

    def _by_name(self, results: Sequence[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for obj in self._collect(results):
            out.setdefault(obj.name, obj)  # the first registered (highest priority) wins
        return out

    def domains(self) -> dict[str, "Domain"]:
        return self._by_name(self._pm.hook.evo_register_domains())

    def diagnostics(self) -> dict[str, "Diagnostic"]:
        return self._by_name(self._pm.hook.evo_register_diagnostics())

    def interventions(self) -> dict[str, "Intervention"]:
        return self._by_name(self._pm.hook.evo_register_interventions())

    def proposers(self) -> dict[str, "Proposer"]:
        return self._by_name(self._pm.hook.evo_register_proposers())

    def backtesters(self) -> dict[str, "Backtester"]:
        return self._by_name(self._pm.hook.evo_register_backtesters())

    def gates(self) -> dict[str, "Gate"]:
        return self._by_name(self._pm.hook.evo_register_gates())

    def sinks(self, config: Mapping[str, Any]) -> list["Sink"]:
        return self._collect(self._pm.hook.evo_register_sinks(config=config))

    def sink_names(self) -> Optional[set[str]]:
        """The ``[sinks]`` names the installed plugins build, or None when a sink plugin
        does not say (``evo_sink_names``), so that no name can be ruled out."""
        names: set[str] = set()
        for impl in self._pm.hook.evo_register_sinks.get_hookimpls():
            said = [i for i in self._pm.hook.evo_sink_names.get_hookimpls() if i.plugin_name == impl.plugin_name]
            if not said:
                return None
            names |= set(said[0].function() or ())
        return names

    def register_commands(self, app: Any) -> None:
        self._pm.hook.evo_register_commands(app=app)

    def domain(self, name: str) -> "Domain":
        found = self.domains()
        if name not in found:
            have = ", ".join(sorted(found)) or "none"
            broken = f"; {'; '.join(self.load_errors)}" if self.load_errors else ""
            raise PluginError(f"no domain {name!r} is installed (installed: {have}); "
                              f"e.g. pip install evo-plugin-{name}{broken}")
        return found[name]

    def plugin_of(self, hook: str, obj_name: str) -> Optional[str]:
        """Which plugin provides the object called ``obj_name`` through ``hook``."""
        for impl in getattr(self._pm.hook, hook).get_hookimpls():
            for o in impl.function() or ():
                if getattr(o, "name", None) == obj_name:
                    return impl.plugin_name
        return None

    # -- observation ------------------------------------------------------------------------
    def on_events(self, run_id: str, events: Sequence[Any]) -> None:
        self._pm.hook.evo_on_events(run_id=run_id, events=events)

    # -- introspection ---------------------------------------------------------------------
    def contract_problems(self) -> list[str]:
        """One line per registered object that breaks its Protocol (``evo_core.api.contract``)."""
        from evo_core.api.contract import problems

        out = []
        for kind, hook in (("diagnostic", "evo_register_diagnostics"), ("intervention", "evo_register_interventions"),
                           ("proposer", "evo_register_proposers"), ("gate", "evo_register_gates"),
                           ("backtester", "evo_register_backtesters"), ("domain", "evo_register_domains")):
            for obj in self._collect(getattr(self._pm.hook, hook)()):
                found = problems(kind, obj)
                if found:
                    name = getattr(obj, "name", type(obj).__name__)
                    out.append(f"{kind} {name!r} ({type(obj).__module__}): {'; '.join(found)}")
        return out

    def info(self) -> list[PluginInfo]:
        rows = []
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                continue
            dist, ver = self._dists.get(name, (None, None))
            hooks = tuple(sorted(h.name for h in (self._pm.get_hookcallers(plugin) or [])))
            rows.append(PluginInfo(name, dist, ver, hooks, getattr(plugin, "__name__", type(plugin).__name__)))
        return sorted(rows, key=lambda r: r.name)


def _unknown_hook_line(hook: str) -> str:
    import difflib

    if hook in hookspecs.REMOVED_HOOKS:
        return repr(hook) + " (" + hookspecs.removed_hook_message(hook) + ")"
    close = difflib.get_close_matches(hook, [n for n in dir(hookspecs) if n.startswith("evo_")], n=1)
    return f"{hook!r}" + (f" (did you mean {close[0]!r}?)" if close else " (not an evo hook)")


_default: Optional[PluginManager] = None


def get_plugin_manager() -> PluginManager:
    """The process-wide manager, loaded once from entry points."""
    global _default
    if _default is None:
        _default = PluginManager()
    return _default
