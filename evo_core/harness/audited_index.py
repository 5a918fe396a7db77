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
import math
from collections import deque
from typing import Any, Iterable, Optional, Sequence

import numpy as np

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


# the classes a column's values are sorted into (``ColumnView.codes``)
ABSENT, NONE, BOOL, INT, FLOAT, STR, OTHER = range(7)
_CODES = {type(None): NONE, bool: BOOL, int: INT, float: FLOAT, str: STR}
_MISS = object()  # the value id of an absent column


class _Column:
    """One column's values over the index's slots, as arrays: its class code, its value as
    a float where the value is a number or a bool (NaN elsewhere), the value itself, and an
    id per distinct (class, value). ``exotic``: a value these arrays cannot stand for (an
    int beyond a float, an unhashable value) has been seen; readers then take the scalar path."""

    __slots__ = ("codes", "num", "obj", "vid", "ids", "exotic")

    def __init__(self, capacity: int) -> None:
        self.codes = np.zeros(capacity, dtype=np.int8)  # ABSENT
        self.num = np.full(capacity, np.nan)
        self.obj = np.empty(capacity, dtype=object)
        self.vid = np.zeros(capacity, dtype=np.int64)  # 0: absent
        self.ids: dict[tuple[type, Any], int] = {(object, _MISS): 0}
        self.exotic = False

    def grow(self, capacity: int) -> None:
        n = len(self.codes)
        for name, fill in (("codes", ABSENT), ("num", np.nan), ("obj", None), ("vid", 0)):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[:n] = old
            new[n:] = fill
            setattr(self, name, new)

    def put_many(self, slots: list[int], vals: list[Any]) -> None:
        """``put(slot, v)`` for each pair, the arrays written once."""
        codes, nums, vids = [], [], []
        ids = self.ids
        for v in vals:
            code = _CODES.get(v.__class__, OTHER)
            codes.append(code)
            if code == OTHER:
                self.exotic = True
            x = math.nan
            if isinstance(v, (int, float)):
                try:
                    x = float(v)
                except OverflowError:
                    self.exotic = True
            nums.append(x)
            try:
                key = (v.__class__, v)
                vid = ids.get(key)
                if vid is None:
                    vid = ids[key] = len(ids)
            except TypeError:
                self.exotic = True
                vid = -1
            vids.append(vid)
        at = np.array(slots, dtype=np.int64)
        self.codes[at] = codes
        self.num[at] = nums
        obj = self.obj
        for slot, v in zip(slots, vals):  # one at a time: a list value must stay one element
            obj[slot] = v
        self.vid[at] = vids


class ColumnView:
    """The columns of some indexed rollouts (in the order asked for), as arrays: for each
    column name, ``codes``, ``num``, ``obj`` and ``vid`` (see ``_Column``) restricted to
    those rows. ``keys``: the columns at least one of them has, sorted."""

    def __init__(self, columns: dict[Column, _Column], slots: np.ndarray) -> None:
        self._columns, self._slots = columns, slots
        self.n = len(slots)
        self.keys = sorted(k for k, c in columns.items() if (c.codes[slots] != ABSENT).any())

    def exotic(self, key: Column) -> bool:
        return self._columns[key].exotic

    def codes(self, key: Column) -> np.ndarray:
        return self._columns[key].codes[self._slots]

    def num(self, key: Column) -> np.ndarray:
        return self._columns[key].num[self._slots]

    def obj(self, key: Column) -> np.ndarray:
        return self._columns[key].obj[self._slots]

    def vid(self, key: Column) -> np.ndarray:
        return self._columns[key].vid[self._slots]

    def values(self, key: Column) -> list[Any]:
        """``[columns_of(r).get(key) for r in rows]``."""
        return self.obj(key).tolist()

    def take(self, lo: int, hi: int) -> "ColumnView":
        """The view of rows ``lo:hi`` of this one."""
        return ColumnView(self._columns, self._slots[lo:hi])


class AuditedIndex:
    """Per audited rollout of the history: its columns and its hash-order key.

    Entries are keyed by the rollout object (its ``id``; the index holds the rollout, so
    the id cannot be reused while the entry lives). ``add(step, rows)`` indexes a step's
    audited rollouts; ``drop_through(step)`` forgets the steps up to ``step``. Readers only
    read what it returns."""

    def __init__(self) -> None:
        self._steps: deque[tuple[int, list[Any]]] = deque()
        self._entries: dict[int, tuple[Any, dict[Column, Any], str, int]] = {}
        self.version = 0  # bumped on every change: a reader's cache key
        # the columns as arrays over slots (one slot per indexed rollout; freed slots are
        # reclaimed by compacting once they outnumber the live ones)
        self._columns: dict[Column, _Column] = {}
        self._capacity = 64
        self._used = 0
        # rows added but not yet written to the arrays (slot, columns): written on the next
        # read, so that the steps between two reads cost one write
        self._pending: list[tuple[int, dict[Column, Any]]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, step: int, rows: Iterable[Any]) -> None:
        rows = list(rows)
        if self._steps and self._steps[-1][0] == step:
            self._steps[-1][1].extend(rows)
        else:
            self._steps.append((step, rows))
        entries = self._entries
        new: list[tuple[Any, dict[Column, Any]]] = []
        seen: set[int] = set()
        for r in rows:
            old = entries.get(id(r))
            if (old is not None and old[0] is r) or id(r) in seen:
                continue  # indexed already
            seen.add(id(r))
            new.append((r, columns_of(r)))
        if new:
            first = self._reserve(len(new))
            for i, (r, cols) in enumerate(new):
                entries[id(r)] = (r, cols, hash_order_of(r), first + i)
                self._pending.append((first + i, cols))
        self.version += 1

    def _flush(self) -> None:
        """Write the rows added since the last read to the column arrays, all in one go."""
        if not self._pending:
            return
        by_key: dict[Column, tuple[list[int], list[Any]]] = {}
        for slot, cols in self._pending:
            for k, v in cols.items():
                slots_vals = by_key.get(k)
                if slots_vals is None:
                    slots_vals = by_key[k] = ([], [])
                slots_vals[0].append(slot)
                slots_vals[1].append(v)
        self._pending = []
        for k, (slots, vals) in by_key.items():
            col = self._columns.get(k)
            if col is None:
                col = self._columns[k] = _Column(self._capacity)
            col.put_many(slots, vals)

    def _reserve(self, n: int) -> int:
        """The first of ``n`` consecutive free slots at the end (compacting or growing)."""
        if self._used + n > self._capacity:
            self._compact()
        if self._used + n > self._capacity:
            while self._used + n > self._capacity:
                self._capacity *= 2
            for c in self._columns.values():
                c.grow(self._capacity)
        first = self._used
        self._used += n
        return first

    def _compact(self) -> None:
        """Move the live entries to the first slots (in slot order) when most slots are free."""
        live = sorted(self._entries.items(), key=lambda kv: kv[1][3])
        if len(live) * 2 > self._used:
            return
        self._flush()
        old = np.array([e[3] for _, e in live], dtype=np.int64)
        n = len(live)
        for col in self._columns.values():
            for name in ("codes", "num", "obj", "vid"):
                arr = getattr(col, name)
                arr[:n] = arr[old]
            col.codes[n:] = ABSENT
            col.num[n:] = np.nan
            col.obj[n:] = None
            col.vid[n:] = 0
        for slot, (key, e) in enumerate(live):
            self._entries[key] = (e[0], e[1], e[2], slot)
        self._used = n

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

    def _entry(self, r: Any) -> Optional[tuple[Any, dict[Column, Any], str, int]]:
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

    def hash_orders(self, rows: Sequence[Any]) -> list[str]:
        """``[self.hash_order(r) for r in rows]``."""
        entries = self._entries
        out = []
        for r in rows:
            hit = entries.get(id(r))
            out.append(hit[2] if hit is not None and hit[0] is r else hash_order_of(r))
        return out

    def columns_of_rows(self, rows: Sequence[Any]) -> list[dict[Column, Any]]:
        return [self.columns(r) for r in rows]

    def view(self, rows: Sequence[Any]) -> Optional[ColumnView]:
        """The columns of ``rows`` as arrays, or None when one of them is not indexed."""
        entries = self._entries
        slots = []
        for r in rows:
            hit = entries.get(id(r))
            if hit is None or hit[0] is not r:
                return None
            slots.append(hit[3])
        self._flush()
        return ColumnView(self._columns, np.array(slots, dtype=np.int64))


__all__ = ["AuditedIndex", "Column", "ColumnView", "columns_of", "hash_order_of"]
