"""The pass's event buffer: every decision is an event, folded into a working copy of the
state as it is emitted, so later decisions of the same pass see earlier ones exactly as a
replay of the log would. ``ENGINE`` is who emits the engine's own events."""

from __future__ import annotations

from typing import Any, Mapping

from evo_core.state import HarnessState, apply
from evo_events import Emitter, Event

ENGINE_VERSION = "2"
ENGINE = Emitter("evo_harness", ENGINE_VERSION)


class PassBuffer:
    def __init__(self, state: HarnessState) -> None:
        self.state = state  # a working copy: the loop folds the committed events into its own
        self.events: list[Event] = []

    def emit(self, *events: Event) -> None:
        for ev in events:
            self.events.append(ev)
            apply(self.state, ev)


def jsonable(obj: Any) -> Any:
    """Coerce plugin output into canonical-JSON-safe data (tuples → lists, keys → str)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in (sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj)]
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return None
        return obj
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)
