"""One isolation wrapper: a plugin that raises becomes a ``PluginFailed`` event, and the
pass goes on without it."""

from __future__ import annotations

import traceback
from typing import Any, Callable, TypeVar

import structlog

from evo_core.plugins import PluginFailure
from evo_events import Emitter, Event

log = structlog.get_logger("evo.harness")
T = TypeVar("T")


class Isolation:
    def __init__(self, run_id: str, step: int, emit: Callable[[Event], None], emitter: Emitter) -> None:
        self.run_id, self.step, self._emit, self.emitter = run_id, step, emit, emitter

    def call(self, plugin: str, hook: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        try:
            return True, fn()
        except Exception as exc:
            self.failed(PluginFailure.of(plugin, hook, exc, traceback.format_exc(limit=5)))
            return False, None

    def failed(self, failure: PluginFailure) -> None:
        log.warning("plugin_failed", plugin=failure.plugin, hook=failure.hook,
                    error=f"{failure.error_type}: {failure.message}")
        self._emit(failure.to_event(self.run_id, self.step, self.emitter))

    def missing(self, plugin: str, hook: str, what: str) -> None:
        self.failed(PluginFailure(plugin, hook, "NotInstalled", f"{what} {plugin!r} is configured but not installed", False))


def call_quietly(fn: Callable[[], Any]) -> Any:
    """For pure reads inside a guarded call (e.g. a measure during a backtest): None on error."""
    try:
        return fn()
    except Exception:
        return None
