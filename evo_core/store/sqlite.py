"""``sqlite:///path`` stores: events on the eventsourcing SQLite recorder, blobs as files.

URL forms: ``sqlite:///relative/path.sqlite``, ``sqlite:////absolute/path.sqlite``;
query option ``?synchronous=full|normal`` (default ``full``, see docs/store.md).

Durability: WAL journal. With ``synchronous=FULL`` (the default) every committed batch is
fsynced before ``append`` returns, so it survives a process crash *and* power loss or an
OS crash. With ``synchronous=NORMAL`` a committed batch survives a process crash, but the
last few batches before a power loss may be lost (the database stays consistent either
way: a batch is all there or not at all). One fsync per batch (per training step) is
cheap, and promotions are decisions an audit must not lose, hence FULL.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from evo_core.store.blobs import FileBlobStore
from evo_core.store.facade import EventStore
from evo_core.store.records import NoEventLog, StoreError

SYNC_MODES = {"full": "FULL", "normal": "NORMAL", "extra": "EXTRA", "off": "OFF"}


def sqlite_path(url: str) -> tuple[str, dict[str, str]]:
    """The file path and options of a ``sqlite://`` URL."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"bad SQLite store URL {url!r}: use sqlite:///relative/path or sqlite:////absolute/path")
    parts = urlsplit(url)
    path = url[len("sqlite:///"):].split("?", 1)[0]
    if not path:
        raise StoreError(f"bad SQLite store URL {url!r}: no file path")
    if path == ":memory:" or "mode=memory" in url:
        raise StoreError(f"SQLite store URL {url!r}: in-memory SQLite is not supported; use memory:// instead")
    opts = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(opts) - {"synchronous"}
    if unknown:
        raise StoreError(f"SQLite store URL {url!r}: unknown option(s) {', '.join(sorted(unknown))} "
                         "(known: synchronous)")
    return path, opts


def open_sqlite(url: str, *, read_only: bool = False) -> EventStore:
    """Open (creating it if needed) the store at ``url``; ``read_only`` opens an existing
    one without writing anything, so a store in a read-only directory can be read."""
    from evo_core.store.es.sqlite import open_sqlite_backend

    path, opts = sqlite_path(url)
    sync = opts.get("synchronous", "full").lower()
    if sync not in SYNC_MODES:
        raise StoreError(f"SQLite store URL {url!r}: synchronous must be one of {', '.join(SYNC_MODES)}")
    p = Path(path)
    if p.exists() and p.is_dir():
        raise StoreError(f"SQLite store {url!r}: {path!r} is a directory, not a database file")
    if read_only:
        if not p.exists():
            raise NoEventLog(f"no store at {path!r} ({url})")
        backend, snapshots = open_sqlite_backend(os.fspath(p), url, read_only=True)
        return EventStore(backend, FileBlobStore(p.parent / "blobs", read_only=True), snapshots)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"SQLite store {url!r}: cannot create {str(p.parent)!r}: {exc.strerror}") from None
    backend, snapshots = open_sqlite_backend(os.fspath(p), url, synchronous=SYNC_MODES[sync])
    return EventStore(backend, FileBlobStore(p.parent / "blobs"), snapshots)
