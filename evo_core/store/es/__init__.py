"""SQLite and PostgreSQL backends on the ``eventsourcing`` library's recorders.

This package is the only part of EvoTrainer that imports ``eventsourcing``.

Mapping onto the library:
- a stream is an originator: ``originator_id = uuid5(STREAM_NS, stream name)``; the names
  live in a ``<table>_streams`` table written in the same transaction as a stream's
  first batch, so ``streams()`` and ``read_all()`` can name them;
- a stream version is ``originator_version``; the recorder's unique
  ``(originator_id, originator_version)`` is the optimistic-concurrency check: a writer
  with a stale expected version collides on the first version it tries to write and
  gets ``ConcurrencyConflict`` with nothing written;
- the global position is the application recorder's notification id (SQLite rowid,
  PostgreSQL ``bigserial`` under the library's table lock, so ids follow commit order);
- ``topic`` is the event type name; ``state`` is the row of ``evo_core.store.rows``
  (a header line with chain hash, schema version, time, event id and crc, then the payload);
- every append also records the stream's new head (version, chain hash) in
  ``<table>_heads``, in its own transaction, so rows removed or added behind the store's
  back are found by ``verify`` and refused by the next append;
- snapshots are the library's snapshot pattern: an aggregate recorder (table
  ``<table>_snapshots``) whose originator is ``uuid5(stream + fold fingerprint)`` and whose
  version is the stream version the state was folded up to.

Modules: ``backend`` (the ``Backend`` over either recorder), ``sqlite`` and ``postgres``
(one recorder each, and how to open it), ``snapshots``. Only ``names`` is imported here,
so naming a table does not load the library.
"""

from evo_core.store.es.names import BULK_TYPE, DEFAULT_TABLE, stream_uuid

__all__ = ["BULK_TYPE", "DEFAULT_TABLE", "stream_uuid"]
