"""The audited rollouts of the evidence history, indexed once as they arrive.

Induction contrasts the audited rollouts on every column a rollout carries (its generic
features, its domain's signals, ``truncated`` and ``length``) and splits them into a fitting
and a testing half in a hash order of their ids. Both are properties of the logged rollout
alone, so the evidence window (``EvidenceWindow``) computes them once, when the rollout's
step is added, and forgets them when the step leaves the history; every later pass reads
them from here instead of recomputing them (or rescanning the history).

Proposers see the index as ``ProposalContext.audited_index``. Everything it returns for a
rollout it has not indexed (a stand-in, a view, a rollout of another history) is computed
on the spot, with the same result: the index is a cache, never a second definition.
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any, Iterable, Optional, Sequence

Column = tuple[str, str]  # ("feature" | "signal" | "field", name)


def columns_of(r: Any) -> dict[Column, Any]:
    """A rollout's columns for induction: its features, its signals, ``truncated`` and ``length``."""
    out: dict[Column, Any] = {}
    for k, v in (getattr(r, "features", None) or {}).items():
        out[("feature", k)] = v
    for k, v in (r.signals or {}).items():
        out[("signal", k)] = v
    out[("field", "truncated")] = r.truncated
    out[("field", "length")] = r.length
    return out


def hash_order_of(r: Any) -> str:
    """A rollout's place in the deterministic hash order that splits samples into halves."""
    return hashlib.sha1(r.event_id.encode()).hexdigest()


class AuditedIndex:
    """Per audited rollout of the history: its columns and its hash-order key.

    Entries are keyed by the rollout object (its ``id``; the index holds the rollout, so
    the id cannot be reused while the entry lives). ``add(step, rows)`` indexes a step's
    audited rollouts; ``drop_through(step)`` forgets the steps up to ``step``. Readers only
    read what it returns."""

    def __init__(self) -> None:
        self._steps: deque[tuple[int, list[Any]]] = deque()
        self._entries: dict[int, tuple[Any, dict[Column, Any], str]] = {}
        self.version = 0  # bumped on every change: a reader's cache key

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, step: int, rows: Iterable[Any]) -> None:
        rows = list(rows)
        if self._steps and self._steps[-1][0] == step:
            self._steps[-1][1].extend(rows)
        else:
            self._steps.append((step, rows))
        entries = self._entries
        for r in rows:
            entries[id(r)] = (r, columns_of(r), hash_order_of(r))
        self.version += 1

    def drop_through(self, step: int) -> None:
        """Forget the rollouts of the steps ``<= step``."""
        changed = False
        while self._steps and self._steps[0][0] <= step:
            _, rows = self._steps.popleft()
            for r in rows:
                hit = self._entries.get(id(r))
                if hit is not None and hit[0] is r:
                    del self._entries[id(r)]
            changed = True
        if changed:
            self.version += 1

    def _entry(self, r: Any) -> Optional[tuple[Any, dict[Column, Any], str]]:
        hit = self._entries.get(id(r))
        return hit if hit is not None and hit[0] is r else None

    def columns(self, r: Any) -> dict[Column, Any]:
        """``columns_of(r)``, from the index when ``r`` is in it."""
        hit = self._entry(r)
        return hit[1] if hit is not None else columns_of(r)

    def hash_order(self, r: Any) -> str:
        """``hash_order_of(r)``, from the index when ``r`` is in it."""
        hit = self._entry(r)
        return hit[2] if hit is not None else hash_order_of(r)

    def columns_of_rows(self, rows: Sequence[Any]) -> list[dict[Column, Any]]:
        return [self.columns(r) for r in rows]


__all__ = ["AuditedIndex", "Column", "columns_of", "hash_order_of"]
