"""Snapshot cache on the library's aggregate recorder (see ``evo_core.store.snapshots``)."""

from __future__ import annotations

import json
from typing import Any, Optional

from eventsourcing.persistence import IntegrityError as EsIntegrityError
from eventsourcing.persistence import StoredEvent as EsStoredEvent

from evo_core.store.es.names import snapshot_uuid
from evo_core.store.records import StoreError


class EsSnapshots:
    """Snapshots in ``<table>_snapshots``. Opened read-only, ``save`` keeps nothing (a
    cache may always miss) and ``clear`` refuses."""

    def __init__(self, recorder: Any, *, read_only: bool = False, owns_datastore: bool = False) -> None:
        self.rec = recorder
        self.read_only = read_only
        self._owns = owns_datastore

    def save(self, stream: str, fingerprint: str, version: int, event_hash: str, state: dict) -> None:
        if self.read_only:
            return
        data = json.dumps({"hash": event_hash, "state": state}, sort_keys=True, separators=(",", ":")).encode()
        ev = EsStoredEvent(originator_id=snapshot_uuid(stream, fingerprint), originator_version=version,
                           topic="evo.HarnessStateSnapshot", state=data)
        try:
            self.rec.insert_events([ev])
        except EsIntegrityError:
            pass  # another process cached the same version first: same answer

    def latest(self, stream: str, fingerprint: str, at_most: int) -> Optional[tuple[int, str, dict]]:
        rows = self.rec.select_events(snapshot_uuid(stream, fingerprint), lte=at_most, desc=True, limit=1)
        if not rows:
            return None
        try:
            data = json.loads(rows[0].state)
            return rows[0].originator_version, data["hash"], data["state"]
        except (ValueError, KeyError, TypeError):
            return None  # a damaged cache entry is ignored, never trusted

    def clear(self) -> int:
        if self.read_only:
            raise StoreError("the store was opened read-only: its snapshots cannot be cleared")
        return self.rec.clear_all()

    def close(self) -> None:
        if self._owns:
            try:
                self.rec.datastore.close()
            except Exception:  # closing twice or after a failed open is harmless
                pass
