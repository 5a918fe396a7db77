"""Open a store from a URL."""

from __future__ import annotations

import os

from evo_core.store.blobs import MemoryBlobStore
from evo_core.store.facade import EventStore
from evo_core.store.records import StoreError

DEFAULT_URL = "sqlite:///.evo/evo.sqlite"


def default_url() -> str:
    return os.environ.get("EVO_STORE") or DEFAULT_URL


def open_store(url: str | None = None, *, read_only: bool = False) -> EventStore:
    """Open the store at ``url`` (default: ``default_url()``). ``read_only`` opens an
    existing store without writing anything (no journal-mode change, no table creation,
    read-only sessions): what the reading commands use, so that a store in a read-only
    directory or behind a read-only database role can still be verified and audited."""
    url = url or default_url()
    if url.startswith("memory://"):
        from evo_core.store.memory import MemoryBackend

        return EventStore(MemoryBackend(url), MemoryBlobStore())
    if url.startswith("sqlite://"):
        from evo_core.store.sqlite import open_sqlite

        return open_sqlite(url, read_only=read_only)
    if url.startswith(("postgresql://", "postgres://")):
        from evo_core.store.postgres import open_postgres

        return open_postgres(url, read_only=read_only)
    raise StoreError(f"unsupported store URL {url!r}: use memory://, sqlite:///PATH or postgresql://…")
