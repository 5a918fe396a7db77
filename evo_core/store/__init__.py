"""Event store facade, backends, blobs and snapshots.

``open_store(url)`` accepts ``memory://``, ``sqlite:///path`` and
``postgresql://…``; with no URL it opens ``sqlite:///.evo/evo.sqlite`` under the
working directory (or ``$EVO_STORE``).
"""

from evo_core.store.blobs import BlobError, BlobStore, FileBlobStore, MemoryBlobStore, get_json, put_json
from evo_core.store.facade import RUN_PREFIX, EventStore, run_stream
from evo_core.store.open import DEFAULT_URL, default_url, open_store
from evo_core.store.records import (
    BrokenStream,
    ConcurrencyConflict,
    CorruptRecord,
    NoEventLog,
    StoredEvent,
    StoreError,
    StoreUnavailable,
    StreamHead,
)
from evo_core.store.rows import AppendResult
from evo_core.store.seal import seal_run_finished
from evo_core.store.verify import ExpectedHead, StreamReport, VerifyReport

__all__ = [
    "BlobError", "BlobStore", "FileBlobStore", "MemoryBlobStore", "get_json", "put_json",
    "RUN_PREFIX", "EventStore", "run_stream",
    "DEFAULT_URL", "default_url", "open_store",
    "AppendResult", "BrokenStream", "ConcurrencyConflict", "CorruptRecord", "NoEventLog", "StoredEvent", "StoreError",
    "StoreUnavailable", "StreamHead",
    "seal_run_finished",
    "ExpectedHead", "StreamReport", "VerifyReport",
]
