"""``postgresql://user:pass@host:port/db`` stores, for many writers on many machines.

Events go to the eventsourcing PostgreSQL application recorder. Blobs go to a table in
the same database (``<table>_blobs``) so that every machine of a run can read every
trajectory and checkpoint without a shared file system; ``?blobs=/shared/dir`` puts them
in a directory instead. Other options: ``?schema=NAME`` (default ``public``; created if
missing), ``?table=NAME`` (table prefix, default ``evo_events``), ``?connect_timeout=S``.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from evo_core.store.blobs import FileBlobStore
from evo_core.store.facade import EventStore
from evo_core.store.records import StoreError, StoreUnavailable

_OPTIONS = {"schema", "table", "blobs", "connect_timeout", "sslmode"}


def parse_postgres_url(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(f"bad PostgreSQL store URL {url!r}")
    opts = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(opts) - _OPTIONS
    if unknown:
        raise StoreError(f"PostgreSQL store URL: unknown option(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(_OPTIONS))})")
    for key in ("schema", "table"):
        val = opts.get(key)
        if val is not None and not (val.replace("_", "").isalnum() and not val[0].isdigit() and len(val) <= 40):
            raise StoreError(f"PostgreSQL store URL: {key}={val!r} must be a plain identifier (letters, digits, _)")
    try:
        port = parts.port or 5432
    except ValueError:
        raise StoreError(f"bad port in PostgreSQL store URL {url!r}") from None
    return {
        "dbname": unquote(parts.path.lstrip("/")) or "postgres",
        "host": parts.hostname or "127.0.0.1",
        "port": port,
        "user": unquote(parts.username or "postgres"),
        "password": unquote(parts.password or ""),
        "schema": opts.get("schema", "public"),
        "table": opts.get("table", "evo_events"),
        "blobs": opts.get("blobs"),
        "connect_timeout": float(opts.get("connect_timeout", 5)),
    }


def open_postgres(url: str, *, read_only: bool = False) -> EventStore:
    """Open the store at ``url`` (creating its tables if needed); ``read_only`` runs no
    DDL and opens every session read-only."""
    try:
        from evo_core.store.es.postgres import open_postgres_backend
    except ImportError as exc:
        raise StoreUnavailable(f"PostgreSQL stores need the postgres extra ({exc.name} is missing): "
                               "pip install 'evotrainer[postgres]'") from None

    cfg = parse_postgres_url(url)
    blobs_dir = cfg.pop("blobs")
    backend, snapshots, table_blobs = open_postgres_backend(url=redact(url), read_only=read_only, **cfg)
    blobs = FileBlobStore(blobs_dir, read_only=read_only) if blobs_dir else table_blobs
    return EventStore(backend, blobs, snapshots)


def redact(url: str) -> str:
    """The URL with its password replaced, for messages and ``store.url``."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
