"""Time travel: the harness state of a run at any point, and what changed between two.

``checkout(store, run_id, at=...)`` folds the run's log up to a point. ``at`` may be

- a harness version ``H`` (int, or a string of digits): the state right after the event
  that made the harness version ``H`` (the promotion or revert); ``0`` is the state right
  after ``RunStarted``;
- a stream position: ``pos:N`` (after the run's N-th event), ``head``/``latest`` (the
  whole log) or ``start`` (after the first event);
- an ISO-8601 time (``2026-01-01T12:00:00Z``): after the last event recorded at or
  before it;
- an event id (of a promotion, rejection or other state event): right after that event.

Only the event types the fold reacts to are read (filtered in the database), so the
thousands of rollouts in between are never decoded. Snapshots are a cache: a snapshot
is used only if the log still has the same event hash at its version, and deleting all
of them changes no answer.
"""

from __future__ import annotations

import datetime as _dt
import weakref
from functools import lru_cache
from typing import Any, Optional, Union

from evo_events import Event, InterventionReverted, Promoted, registered_types
from evo_core import state as _state_mod
from evo_core.state import HarnessState, apply
from evo_core.store.facade import EventStore, run_stream
from evo_core.store.records import StoreError
from evo_core.store.snapshots import fold_fingerprint

At = Union[int, str, None]

SNAPSHOT_EVERY = 100  # state events folded between cached snapshots
SNAPSHOT_TARGET_MIN = 25  # cache the requested point too when at least this many events were folded


class CheckoutError(StoreError):
    """``at`` names no point of the run, or the run does not exist."""


def _fold_classes() -> tuple[type[Event], ...]:
    # The event classes ``evo_core.state`` imports are the ones its ``apply`` handles.
    return tuple(v for v in vars(_state_mod).values()
                 if isinstance(v, type) and issubclass(v, Event) and v is not Event)


@lru_cache(maxsize=8)
def _relevant(n_registered: int) -> frozenset[str]:
    base = _fold_classes()
    return frozenset(name for name, cls in registered_types().items() if issubclass(cls, base))


def state_event_types() -> frozenset[str]:
    """Type names the fold reacts to (including plugin subclasses of those types)."""
    return _relevant(len(registered_types()))


def fold_run(store: EventStore, run_id: str, to_version: Optional[int] = None, *, use_snapshots: bool = True) -> HarnessState:
    """The state after the run's first ``to_version`` events (all of them when None)."""
    stream = run_stream(run_id)
    head = store.stream_version(stream)
    if head == 0:
        raise CheckoutError(f"no run {run_id!r} in {store.url}")
    version = head if to_version is None else to_version
    if not 1 <= version <= head:
        raise CheckoutError(f"run {run_id!r} has events 1..{head}; position {version} is outside it")
    return _fold_stream(store, stream, version, use_snapshots)


def _fold_stream(store: EventStore, stream: str, version: int, use_snapshots: bool) -> HarnessState:
    fp = fold_fingerprint()
    state: Optional[HarnessState] = None
    start = 0
    snaps = store.snapshots if use_snapshots else None
    if snaps is not None:
        got = snaps.latest(stream, fp, version)
        if got is not None:
            v, h, data = got
            rec = next(iter(store.read_stream(stream, from_version=v, to_version=v)), None)
            if rec is not None and rec.hash == h:  # the log still says what the snapshot saw
                try:
                    state, start = HarnessState.from_dict(data), v
                except Exception:
                    state, start = None, 0  # an unreadable cache entry is ignored
    if state is None:
        state = HarnessState()
    n = 0
    last = None
    for rec in store.read_stream(stream, from_version=start + 1, to_version=version, types=state_event_types()):
        apply(state, rec.decode(), rec.version)
        n += 1
        last = rec
        if snaps is not None and n % SNAPSHOT_EVERY == 0:
            snaps.save(stream, fp, rec.version, rec.hash, state.to_dict())
    if snaps is not None and last is not None and n >= SNAPSHOT_TARGET_MIN and n % SNAPSHOT_EVERY:
        snaps.save(stream, fp, last.version, last.hash, state.to_dict())
    state.position = version
    return state


def resolve_at(store: EventStore, run_id: str, at: At) -> int:
    """The stream version (1-based) that ``at`` points at."""
    stream = run_stream(run_id)
    head = store.stream_version(stream)
    if head == 0:
        raise CheckoutError(f"no run {run_id!r} in {store.url}")
    if at is None:
        return head
    if isinstance(at, bool):
        raise CheckoutError(f"--at {at!r}: expected a harness version, pos:N, an ISO time or an event id")
    if isinstance(at, int):
        return _harness_version_position(store, run_id, at)
    text = str(at).strip()
    low = text.lower()
    if low in ("head", "latest", "end"):
        return head
    if low in ("start", "first"):
        return 1
    if low.startswith(("pos:", "position:")):
        raw = text.split(":", 1)[1]
        try:
            n = int(raw)
        except ValueError:
            raise CheckoutError(f"--at {text!r}: {raw!r} is not a stream position") from None
        if not 1 <= n <= head:
            raise CheckoutError(f"--at {text!r}: run {run_id!r} has positions 1..{head}")
        return n
    if text.isdigit() and len(text) <= 9:
        return _harness_version_position(store, run_id, int(text))
    when = _parse_time(text)
    if when is not None:
        return _time_position(store, run_id, when, text)
    for rec in store.read_stream(stream, types=state_event_types()):
        if rec.event_id == text:
            return rec.version
    raise CheckoutError(
        f"--at {text!r} is not a harness version, pos:N, head, an ISO time, or the id of a state event "
        f"(promotion, rejection, …) of run {run_id!r}")


class _HarnessIndex:
    """harness version -> stream version of the event that made it, for one stream. The log
    is append-only, so the index only ever grows: each lookup scans just the new events.
    The hash of the last scanned event is re-checked so a rewritten log is rescanned."""

    def __init__(self) -> None:
        self.scanned = 0
        self.last_hash = ""
        self.first: dict[int, int] = {}
        self.latest = 0


_INDEXES: "weakref.WeakKeyDictionary[EventStore, dict[str, _HarnessIndex]]" = weakref.WeakKeyDictionary()


def _harness_index(store: EventStore, stream: str) -> _HarnessIndex:
    per_store = _INDEXES.setdefault(store, {})
    idx = per_store.get(stream)
    if idx is not None and idx.scanned:
        rec = next(iter(store.read_stream(stream, from_version=idx.scanned, to_version=idx.scanned)), None)
        if rec is None or rec.hash != idx.last_hash:
            idx = None
    if idx is None:
        idx = per_store[stream] = _HarnessIndex()
    for rec in store.read_stream(stream, from_version=idx.scanned + 1,
                                 types=(Promoted.TYPE, InterventionReverted.TYPE)):
        after = rec.decode().harness_version_after  # type: ignore[attr-defined]
        idx.first.setdefault(after, rec.version)
        idx.latest = after
        idx.scanned, idx.last_hash = rec.version, rec.hash
    return idx


def _harness_version_position(store: EventStore, run_id: str, h: int) -> int:
    if h < 0:
        raise CheckoutError(f"harness version {h} is negative")
    if h == 0:
        return 1
    idx = _harness_index(store, run_stream(run_id))
    if h not in idx.first:
        raise CheckoutError(f"run {run_id!r} never reached harness version {h} (latest: {idx.latest})")
    return idx.first[h]


def _parse_time(text: str) -> Optional[float]:
    if len(text) < 10 or text[4] != "-":
        return None
    try:
        dt = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return dt.timestamp()


def _time_position(store: EventStore, run_id: str, when: float, text: str) -> int:
    """Binary search on recorded times (appends to one stream are recorded in order)."""
    stream = run_stream(run_id)
    lo, hi = 1, store.stream_version(stream)

    def t(v: int) -> float:
        return next(iter(store.read_stream(stream, from_version=v, to_version=v))).recorded_at

    if t(lo) > when:
        first = _dt.datetime.fromtimestamp(t(lo), _dt.timezone.utc).isoformat()
        raise CheckoutError(f"--at {text!r}: run {run_id!r} has no event that old (first at {first})")
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if t(mid) <= when:
            lo = mid
        else:
            hi = mid - 1
    return lo


def checkout(store: EventStore, run_id: str, at: At = None, *, use_snapshots: bool = True) -> HarnessState:
    """The run's harness state at ``at`` (see the module docstring)."""
    return fold_run(store, run_id, resolve_at(store, run_id, at), use_snapshots=use_snapshots)


# --- diff ---------------------------------------------------------------------------------


def _changed(a: Any, b: Any) -> Optional[list]:
    return None if a == b else [a, b]


def _dict_diff(a: dict, b: dict) -> dict:
    out: dict[str, Any] = {}
    added = {k: b[k] for k in b.keys() - a.keys()}
    removed = {k: a[k] for k in a.keys() - b.keys()}
    changed = {k: [a[k], b[k]] for k in a.keys() & b.keys() if a[k] != b[k]}
    if added:
        out["added"] = dict(sorted(added.items()))
    if removed:
        out["removed"] = dict(sorted(removed.items()))
    if changed:
        out["changed"] = dict(sorted(changed.items()))
    return out


def _diag(d) -> dict:
    return {"version": d.version, "params": d.params, "spec": d.spec, "source": d.source}


def _interv(i) -> dict:
    return {"kind": i.kind, "name": i.name, "params": i.params, "targets": list(i.targets),
            "since_harness_version": i.since_harness_version, "skill_id": i.skill_id}


def _entity_diff(a: dict, b: dict, view) -> dict:
    out: dict[str, Any] = {}
    va = {k: view(v) for k, v in a.items()}
    vb = {k: view(v) for k, v in b.items()}
    if vb.keys() - va.keys():
        out["added"] = {k: vb[k] for k in sorted(vb.keys() - va.keys())}
    if va.keys() - vb.keys():
        out["removed"] = {k: va[k] for k in sorted(va.keys() - vb.keys())}
    changed = {}
    for k in sorted(va.keys() & vb.keys()):
        d = _dict_diff(va[k], vb[k])
        if d:
            changed[k] = {f: v for f, v in d.get("changed", {}).items()}
            changed[k].update({f: [None, v] for f, v in d.get("added", {}).items()})
            changed[k].update({f: [v, None] for f, v in d.get("removed", {}).items()})
    if changed:
        out["changed"] = changed
    return out


def diff_states(a: HarnessState, b: HarnessState) -> dict[str, Any]:
    """What changed from ``a`` to ``b``: a JSON-ready dict with only the parts that differ.

    Keys: ``harness_version``/``policy_version``/``main_policy_version``/``step``/``status``
    (as ``[a, b]``), ``diagnostics`` and ``interventions`` (``added``/``removed``/``changed``,
    per field ``[a, b]``), ``gate_config`` (``added``/``removed``/``changed``), ``skills``
    (``added``/``removed``/``retired``/``unretired``), ``ledger`` (entries only in ``b``).
    """
    out: dict[str, Any] = {"run_id": b.run_id or a.run_id, "from_position": a.position, "to_position": b.position}
    for f in ("harness_version", "policy_version", "main_policy_version", "step", "status"):
        c = _changed(getattr(a, f), getattr(b, f))
        if c is not None:
            out[f] = c
    for key, view in (("diagnostics", _diag), ("interventions", _interv)):
        d = _entity_diff(getattr(a, key), getattr(b, key), view)
        if d:
            out[key] = d
    g = _dict_diff(a.gate_config, b.gate_config)
    if g:
        out["gate_config"] = g
    sk: dict[str, Any] = {}
    added = sorted(b.skills.keys() - a.skills.keys())
    removed = sorted(a.skills.keys() - b.skills.keys())
    if added:
        sk["added"] = {k: {"name": b.skills[k].name, "retired": b.skills[k].retired} for k in added}
    if removed:
        sk["removed"] = {k: {"name": a.skills[k].name} for k in removed}
    both = a.skills.keys() & b.skills.keys()
    retired = sorted(k for k in both if b.skills[k].retired and not a.skills[k].retired)
    unretired = sorted(k for k in both if a.skills[k].retired and not b.skills[k].retired)
    if retired:
        sk["retired"] = retired
    if unretired:
        sk["unretired"] = unretired
    if sk:
        out["skills"] = sk
    seen = {e.event_id for e in a.ledger}
    new = [e for e in b.ledger if e.event_id not in seen]
    if new:
        out["ledger"] = [{"decision": e.decision, "subject": e.subject, "subject_id": e.subject_id, "step": e.step,
                          "harness_version": e.harness_version, "gate": e.gate, "reasons": list(e.reasons),
                          "event_id": e.event_id} for e in new]
    return out


def state_summary(s: HarnessState) -> dict[str, Any]:
    """A JSON-ready view of a state for ``evo checkout``."""
    return {
        "run_id": s.run_id, "position": s.position, "harness_version": s.harness_version,
        "policy_version": s.policy_version, "main_policy_version": s.main_policy_version, "step": s.step,
        "status": s.status, "mode": s.mode,
        "diagnostics": {k: _diag(v) for k, v in sorted(s.diagnostics.items())},
        "interventions": {k: _interv(v) for k, v in sorted(s.interventions.items())},
        "gate_config": s.gate_config,
        "skills": {k: {"name": v.name, "uses": v.uses, "retired": v.retired} for k, v in sorted(s.skills.items())},
        "ledger": [{"decision": e.decision, "subject": e.subject, "subject_id": e.subject_id, "step": e.step,
                    "harness_version": e.harness_version, "gate": e.gate, "reasons": list(e.reasons),
                    "event_id": e.event_id} for e in s.ledger],
        "diagnosis_counts": dict(sorted(s.diagnosis_counts.items())),
    }
