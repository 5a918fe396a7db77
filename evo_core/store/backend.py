"""The backend protocol that the store facade drives."""

from __future__ import annotations

from typing import Collection, Iterator, Optional, Protocol, Sequence

from evo_core.store.records import AppendResult, EncodedBatch, NewRecord, StoredEvent


class Backend(Protocol):
    """Storage of hash-chained records. Implementations: memory, SQLite, PostgreSQL.

    ``append`` writes the whole batch in one transaction or nothing, and raises
    ``ConcurrencyConflict`` when the stream's current version is not ``expected_version``.
    """

    url: str

    def append(self, stream: str, records: Sequence[NewRecord], expected_version: int) -> list[StoredEvent]: ...

    def append_batch(self, batch: EncodedBatch) -> AppendResult:
        """The facade's hot path: the same as ``append``, from parallel lists."""
        ...

    def read_stream(self, stream: str, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Collection[str]] = None) -> Iterator[StoredEvent]:
        """Records in version order; with ``types``, only records of those type names."""
        ...

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]: ...

    def stream_head(self, stream: str) -> tuple[int, str]:
        """(current version, last hash); (0, GENESIS) for an empty stream."""
        ...

    def streams(self, prefix: str = "") -> list[str]: ...

    def max_position(self) -> int: ...

    def close(self) -> None: ...
