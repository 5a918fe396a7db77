"""Snapshots of harness state: a cache only.

A snapshot is (stream, fold fingerprint, stream version) → the state folded up to that
version, plus the chain hash of the event at that version. ``checkout`` uses one only if
that hash still matches the log (a rewritten or tampered log makes it useless, never
wrong) and only under the current fold fingerprint (changing ``evo_core.state`` makes
old snapshots invisible). Deleting every snapshot changes no answer, only speed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from functools import lru_cache
from typing import Optional, Protocol


class SnapshotStore(Protocol):
    def save(self, stream: str, fingerprint: str, version: int, event_hash: str, state: dict) -> None: ...

    def latest(self, stream: str, fingerprint: str, at_most: int) -> Optional[tuple[int, str, dict]]:
        """(version, event hash, state dict) of the newest snapshot at or before ``at_most``."""
        ...

    def clear(self) -> int:
        """Delete every snapshot; returns how many were deleted."""
        ...


class MemorySnapshots:
    def __init__(self) -> None:
        self._data: dict[tuple[str, str], dict[int, tuple[str, str]]] = {}

    def save(self, stream: str, fingerprint: str, version: int, event_hash: str, state: dict) -> None:
        # stored serialised so that a cached state can never alias a live one
        self._data.setdefault((stream, fingerprint), {}).setdefault(version, (event_hash, json.dumps(state)))

    def latest(self, stream: str, fingerprint: str, at_most: int) -> Optional[tuple[int, str, dict]]:
        got = self._data.get((stream, fingerprint))
        if not got:
            return None
        best = max((v for v in got if v <= at_most), default=None)
        if best is None:
            return None
        h, s = got[best]
        return best, h, json.loads(s)

    def clear(self) -> int:
        n = sum(len(v) for v in self._data.values())
        self._data.clear()
        return n


@lru_cache(maxsize=1)
def fold_fingerprint() -> str:
    """Changes whenever the fold code or the state shape changes."""
    from evo_core import state

    return hashlib.sha256(inspect.getsource(state).encode()).hexdigest()[:16]
