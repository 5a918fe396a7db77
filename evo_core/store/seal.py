"""Sealing a finished run: its ``RunFinished`` names the head of the stream just before it.

A hash chain proves that nothing inside a stream changed; it cannot show that the end
is missing. A sealed ``RunFinished`` marks where a run ended, so ``evo verify`` can
report a finished run as sealed, and refuse events added after the seal; and the
run's final head (``EventStore.head`` after the append) is one short value to record
elsewhere and check with ``evo verify RUN --expect HEAD``.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from evo_events import RunFinished
from evo_core.store.facade import run_stream
from evo_core.store.records import ConcurrencyConflict
from evo_core.store.rows import chain_head


def seal_run_finished(store: Any, finished: RunFinished, *, expected_version: int,
                      preceding: Sequence[Any] = ()) -> RunFinished:
    """``finished`` with its seal: the version and chain hash its run's stream will have
    right before it, i.e. after ``preceding`` (events appended in the same batch, before
    it) are appended to the stream at ``expected_version``. Append ``[*preceding, sealed]``
    at ``expected_version`` and nothing after it: verify reports events after the seal of
    a completed run (or after any seal, unless a ``RunResumed`` comes next).

    Raises ``ConcurrencyConflict`` when the stream is no longer at ``expected_version``.
    Costs one indexed lookup (and the encoding of ``preceding``)."""
    stream = run_stream(finished.run_id)
    head = store.head(stream)
    if head.version != expected_version:
        raise ConcurrencyConflict(stream, expected_version, head.version)
    if preceding:
        head = chain_head(stream, head.version, head.hash, list(preceding))
    return attrs.evolve(finished, head_version=head.version, head_hash=head.hash)
