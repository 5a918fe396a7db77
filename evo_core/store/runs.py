"""Naming a run on the command line: a full id, a unique prefix, ``@last``/``latest``, or
``PREFIX@last``.

Run ids end in a random suffix (``quickstart-evolving-3f9a1c2e``); nobody should have to
copy it. ``resolve_run`` turns what a user typed into the one run it names, or raises
``RunNameError`` with one line (an ambiguous prefix lists the candidates).
"""

from __future__ import annotations

from typing import Any, Sequence

from evo_core.store.facade import run_stream
from evo_core.store.records import StoreError

LAST = ("@last", "latest")
MAX_LISTED = 8  # candidates named in an "ambiguous" error


class RunNameError(StoreError):
    """A run name that names no run, or more than one (``candidates``: the runs it could mean)."""

    def __init__(self, message: str, candidates: Sequence[str] = ()) -> None:
        self.candidates = tuple(candidates)
        super().__init__(message)


def runs_by_age(store: Any, run_ids: Sequence[str]) -> list[str]:
    """``run_ids`` oldest first: by the global position of each run's first event (the
    store's own order, the same on every backend, unlike wall clocks)."""
    first: dict[str, int] = {}
    for rid in run_ids:
        rec = next(iter(store.read_stream(run_stream(rid), to_version=1)), None)
        first[rid] = rec.position if rec is not None else 0
    return sorted(run_ids, key=lambda r: (first[r], r))


def _listed(ids: Sequence[str]) -> str:
    more = len(ids) - MAX_LISTED
    return ", ".join(ids[:MAX_LISTED]) + (f" (and {more} more)" if more > 0 else "")


def resolve_run(store: Any, text: str) -> str:
    """The id of the one run ``text`` names in ``store``:

    - a full run id;
    - a unique prefix of one (``quickstart-evolving``);
    - ``@last`` or ``latest``: the newest run in the store;
    - ``PREFIX@last``: the newest run whose id starts with PREFIX.
    """
    name = (text or "").strip()
    if not name:
        raise RunNameError("empty run name: give a run id, a unique prefix of one, or @last")
    runs = store.runs()
    if name in runs:
        return name
    if not runs:
        raise RunNameError(f"no run {name!r} in {store.url}: the store holds no runs")
    newest = name in LAST or name.endswith("@last")
    prefix = "" if name in LAST else (name[: -len("@last")] if newest else name)
    hits = [r for r in runs if r.startswith(prefix)]
    if not hits:
        raise RunNameError(f"no run {name!r} in {store.url} (runs: {_listed(runs_by_age(store, runs)[::-1])})")
    if newest:
        return runs_by_age(store, hits)[-1]
    if len(hits) > 1:
        ordered = runs_by_age(store, hits)[::-1]
        raise RunNameError(f"run name {name!r} is ambiguous in {store.url}: {len(hits)} runs start with it "
                           f"({_listed(ordered)}); give more of the id, or {name}@last for the newest", ordered)
    return hits[0]
