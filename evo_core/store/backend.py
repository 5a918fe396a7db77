"""The backend protocol that the store facade drives."""

from __future__ import annotations

from typing import Any, Collection, Iterator, Optional, Protocol, Sequence

from evo_core.store.records import StoredEvent, StreamHead
from evo_core.store.rows import AppendResult


class Backend(Protocol):
    """Storage of hash-chained rows. Implementations: memory, SQLite, PostgreSQL."""

    url: str
    read_only: bool

    def append(self, stream: str, expected_version: int, prev_hash: str, events: Sequence[Any]) -> AppendResult:
        """The one write: encode, chain and pack ``events`` through ``rows.encode_rows``
        and store them in one transaction, or nothing. ``prev_hash`` is the hash of the
        stream's event at ``expected_version``; when the stream has moved past it, raise
        ``ConcurrencyConflict``."""
        ...

    def read_stream(self, stream: str, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Collection[str]] = None) -> Iterator[StoredEvent]:
        """Records in version order; with ``types``, only records of those type names."""
        ...

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]: ...

    def stream_head(self, stream: str) -> StreamHead:
        """The stream's last stored row: one indexed lookup, no scan."""
        ...

    def recorded_heads(self) -> dict[str, StreamHead]:
        """The head each stream had after its last append, as recorded beside the rows in
        that append's transaction (streams last written before heads were recorded are
        missing). A stream whose rows end elsewhere lost rows outside the store's API."""
        ...

    def streams(self, prefix: str = "") -> list[str]: ...

    def max_position(self) -> int: ...

    def check_writable(self) -> None:
        """Raise ``StoreError`` (one line) unless an append could be written now."""
        ...

    def close(self) -> None: ...
