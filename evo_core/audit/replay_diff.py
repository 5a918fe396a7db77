"""Recorded versus replayed harness work.

- **decisions**: every ``Promoted``/``Rejected`` of either side, keyed by what was decided
  (a checkpoint by step and policy version; a proposal by step and fingerprint, since the
  replay's proposal ids are its own), so a recorded decision and its replayed counterpart
  meet, and a decision only one side made shows up as such;
- **appear / vanish**: diagnoses by (diagnostic, step, kind);
- **same events**: one pass's events, compared event for event apart from event ids (the
  replay's ids are mapped onto the recorded ones they stand for, wherever they are cited).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Sequence

import attrs

from evo_events import (BacktestFailed, BacktestInconclusive, Event, FailureDiagnosed, InterventionProposed, Promoted, Rejected,
                        backtest_decision)

NOT_PROPOSED, NOT_GATED = "not proposed", "not gated"


@attrs.frozen
class Decision:
    key: tuple[Any, ...]
    decision: str  # promoted | rejected
    event: Any  # Promoted | Rejected
    proposal: Optional[InterventionProposed] = None

    @property
    def absent(self) -> str:
        """What the other side did when it has no such decision."""
        return NOT_GATED if self.event.subject == "policy" else NOT_PROPOSED


def decisions(events: Iterable[Event]) -> dict[tuple[Any, ...], Decision]:
    """Every decision of a run (or of a replay), by key; see the module docstring."""
    proposals: dict[str, InterventionProposed] = {}
    out: dict[tuple[Any, ...], Decision] = {}
    seen: Counter[tuple[Any, ...]] = Counter()
    for ev in events:
        if isinstance(ev, InterventionProposed):
            proposals[ev.event_id] = ev
        elif isinstance(ev, (Promoted, Rejected)):
            prop = proposals.get(ev.subject_id) if ev.subject == "intervention" else None
            if ev.subject == "intervention":
                what = (prop.fingerprint if prop is not None else None) or getattr(ev, "fingerprint", None) or ev.subject_id
            else:
                what = ev.subject_id
            base = (ev.subject, ev.step, what)
            key = base + (seen[base],)
            seen[base] += 1
            out[key] = Decision(key, "promoted" if isinstance(ev, Promoted) else "rejected", ev, prop)
    return out


def flips(recorded: Mapping[tuple[Any, ...], Decision], replayed: Mapping[tuple[Any, ...], Decision],
          recorded_diagnoses: Mapping[str, FailureDiagnosed], vanished: set[tuple[str, int, str]]) -> list[dict[str, Any]]:
    """Decisions the replay makes differently, made only by the run, or only by the replay."""
    out: list[dict[str, Any]] = []
    for key, rec in recorded.items():
        rep = replayed.get(key)
        if rep is not None and rep.decision == rec.decision:
            continue
        ev = rec.event
        if rep is not None:
            would, reasons = rep.decision, list(rep.event.reasons)
        else:
            would, reasons = rec.absent, _why_absent(rec, recorded_diagnoses, vanished)
        out.append({"decision_id": ev.event_id, "subject": ev.subject, "subject_id": ev.subject_id, "step": ev.step,
                    "recorded": rec.decision, "would": would, "reasons": reasons})
    for key, rep in replayed.items():
        if key in recorded:
            continue
        ev = rep.event
        subject_id = ev.subject_id if ev.subject != "intervention" else (rep.proposal.name if rep.proposal else ev.subject_id)
        out.append({"decision_id": None, "subject": ev.subject, "subject_id": subject_id, "step": ev.step,
                    "recorded": rep.absent, "would": rep.decision, "reasons": list(ev.reasons)})
    out.sort(key=lambda f: (f["step"], f["subject"], f["subject_id"]))
    return out


def _why_absent(rec: Decision, diagnoses: Mapping[str, FailureDiagnosed], vanished: set[tuple[str, int, str]]) -> list[str]:
    step = rec.event.step
    if rec.event.subject == "policy":
        return [f"the replayed harness ran no policy gate on this checkpoint at step {step}"]
    triggers = [diagnoses[c] for c in (rec.proposal.caused_by if rec.proposal else ()) if c in diagnoses]
    keys = list(dict.fromkeys((d.diagnostic, d.step, d.kind) for d in triggers))
    if keys and all(k in vanished for k in keys):
        return ["every diagnosis behind the proposal vanishes: " + ", ".join(f"{k}@{s}" for _, s, k in keys)]
    return [f"the replayed harness made no such proposal at step {step}"]


def diagnosis_keys(events: Iterable[Event]) -> dict[tuple[str, int, str], FailureDiagnosed]:
    out: dict[tuple[str, int, str], FailureDiagnosed] = {}
    for ev in events:
        if isinstance(ev, FailureDiagnosed):
            out.setdefault((ev.diagnostic, ev.step, ev.kind), ev)
    return out


# --- event for event -----------------------------------------------------------------------------

_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{12}(?:[0-9a-f]{20})?(?![0-9a-f])")
_FULL_ID = re.compile(r"[0-9a-f]{32}")


class IdMap:
    """Replayed event ids → the recorded ids they stand for (and their 12-character
    prefixes, which name skills), filled pass by pass as the events line up."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def align(self, recorded: Sequence[Event], replayed: Sequence[Event]) -> None:
        for a, b in zip(recorded, replayed):
            if type_of(a) == type_of(b):
                self.ids[b.event_id] = a.event_id
                self.ids[b.event_id[:12]] = a.event_id[:12]

    def text(self, ev: Event) -> str:
        """The event as canonical JSON without its own id, citing recorded ids. A list of ids
        is compared as a set: where the engine sorts ids, their order is the ids' own."""
        d = attrs.asdict(ev, recurse=True)
        d.pop("event_id", None)
        d["type"] = type_of(ev)
        return json.dumps(self._map(d), sort_keys=True, default=str)

    def _map(self, x: Any) -> Any:
        if isinstance(x, Mapping):
            return {k: self._map(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            items = [self._map(v) for v in x]
            if items and all(isinstance(v, str) and _FULL_ID.fullmatch(v) for v in x):
                return sorted(items)
            return items
        if isinstance(x, str):
            return _ID.sub(lambda m: self.ids.get(m.group(0), m.group(0)), x)
        return x


def first_difference(recorded: Sequence[Event], replayed: Sequence[Event], ids: IdMap) -> Optional[str]:
    """None when the two passes are the same event for event (apart from event ids), else
    where they first differ."""
    ids.align(recorded, replayed)
    for i, (a, b) in enumerate(zip(recorded, replayed)):
        if type_of(a) != type_of(b):
            return f"event {i + 1}: recorded {_name(a)}, replayed {_name(b)}"
        ta, tb = ids.text(a), ids.text(b)
        if ta != tb:
            da, db = json.loads(ta), json.loads(tb)
            fields = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
            return f"event {i + 1} ({_name(a)}): {', '.join(fields)} differ"
    if len(recorded) != len(replayed):
        longer, who = (recorded, "recorded") if len(recorded) > len(replayed) else (replayed, "replayed")
        extra = longer[min(len(recorded), len(replayed))]
        return f"{len(recorded)} recorded events, {len(replayed)} replayed; the first extra ({who}) is {_name(extra)}"
    return None


def type_of(ev: Event) -> str:
    """The event's type name, reading a legacy ``BacktestFailed`` that records no decision as
    the ``BacktestInconclusive`` a replay now writes for it (the same outcome, renamed)."""
    if isinstance(ev, BacktestFailed) and backtest_decision(ev) is None:
        return BacktestInconclusive.TYPE
    return ev.TYPE


def _name(ev: Event) -> str:
    return type(ev).__name__
