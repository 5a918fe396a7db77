"""One isolation guard: a plugin that raises becomes a ``PluginFailed`` event, and the
pass goes on without it.

    with iso.guard(name, "decide") as g:
        decision = gate.decide(cand, ctx, params)
    if g.failed: ...

A guard, not a wrapper taking a callback: the plugin is called from the caller's own code,
so the call path stays forward (``benchmarks/trace_promotion.py``)."""

from __future__ import annotations

import contextlib
import traceback
from typing import Callable, Iterator

import structlog

from evo_core.plugins import PluginFailure
from evo_events import Emitter, Event

log = structlog.get_logger("evo.harness")


class Guarded:
    """What a guarded block came to: ``failed`` once the plugin raised (and was recorded)."""

    failed = False


class Isolation:
    def __init__(self, run_id: str, step: int, emit: Callable[[Event], None], emitter: Emitter) -> None:
        self.run_id, self.step, self._emit, self.emitter = run_id, step, emit, emitter

    @contextlib.contextmanager
    def guard(self, plugin: str, hook: str) -> Iterator[Guarded]:
        g = Guarded()
        try:
            yield g
        except Exception as exc:
            g.failed = True
            self.failed(PluginFailure.of(plugin, hook, exc, traceback.format_exc(limit=5)))

    def failed(self, failure: PluginFailure) -> None:
        log.warning("plugin_failed", plugin=failure.plugin, hook=failure.hook,
                    error=f"{failure.error_type}: {failure.message}")
        self._emit(failure.to_event(self.run_id, self.step, self.emitter))

    def missing(self, plugin: str, hook: str, what: str) -> None:
        self.failed(PluginFailure(plugin, hook, "NotInstalled", f"{what} {plugin!r} is configured but not installed", False))

