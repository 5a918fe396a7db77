"""How streams and tables are named in the database."""

from __future__ import annotations

import uuid

STREAM_NS = uuid.UUID("6f1d3c2e-5b7a-4e08-9a51-2d0c7e3f9b11")
DEFAULT_TABLE = "evo_events"
# The one high-volume type: a partial index over everything else makes "state-relevant"
# reads (checkout, runs) skip the rollouts without decoding them.
BULK_TYPE = "evo.RolloutCompleted"
PAGE = 5000  # rows per read query


def stream_uuid(stream: str) -> uuid.UUID:
    return uuid.uuid5(STREAM_NS, stream)


def snapshot_uuid(stream: str, fingerprint: str) -> uuid.UUID:
    return uuid.uuid5(STREAM_NS, f"snapshot\x1f{stream}\x1f{fingerprint}")

# The lease table's columns (evo_core.store.lease.LeaseInfo), in order.
LEASE_COLUMNS = ("run_id", "holder", "host", "pid", "pid_started", "acquired_at", "renewed_at")
