"""``evo tail``: follow a run's events as compact, colourised lines.

Rollouts arrive in bulk (hundreds per step), so by default consecutive rollouts of a
step collapse into one summary line; ``per_rollout`` prints each one.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Iterator, Optional

from rich.console import Console
from rich.markup import escape

from evo_core.store import StoredEvent, run_stream

from evo_core.audit.errors import AuditError

COLOURS = {
    "evo.RunStarted": "bold cyan", "evo.RunResumed": "bold cyan", "evo.RunFinished": "bold cyan",
    "evo.RolloutCompleted": "dim", "evo.StepCompleted": "white", "evo.PolicyUpdated": "dim",
    "evo.EvalCompleted": "blue", "evo.FailureDiagnosed": "magenta", "evo.InterventionProposed": "yellow",
    "evo.BacktestPassed": "green", "evo.BacktestFailed": "red",
    "evo.BacktestInconclusive": "yellow", "evo.Promoted": "bold green",
    "evo.Rejected": "bold red", "evo.InterventionReverted": "yellow", "evo.SkillRegistered": "green",
    "evo.SkillRetired": "yellow", "evo.PluginFailed": "bold red",
}


def _n(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return "–" if v is None else str(v)


def _kv(d: dict, keys: Optional[Iterable[str]] = None, limit: int = 6) -> str:
    items = [(k, d[k]) for k in (keys or d) if k in d][:limit]
    return " ".join(f"{k}={_n(v)}" for k, v in items)


def describe(type_name: str, d: dict) -> str:
    """The body of one line (plain text; the caller colours it)."""
    t = type_name.split(".", 1)[-1]
    if t == "RunStarted":
        return f"mode={d.get('harness_mode')} seed={d.get('seed')} code={d.get('code_version')}"
    if t == "RunFinished":
        return f"{d.get('status')} at step {d.get('step')} {d.get('message', '')}".strip()
    if t == "RunResumed":
        return f"from step {d.get('from_step')}"
    if t == "RolloutCompleted":
        strict = {True: "✓", False: "✗", None: "·"}[d.get("strict_correct")]
        err = f" infra_error={d['infra_error']}" if d.get("infra_error") else ""
        return f"reward={_n(d.get('reward'))} strict={strict} len={d.get('length')} {d.get('response_preview', '')[:40]!r}{err}"
    if t == "StepCompleted":
        return f"policy v{d.get('policy_version')} harness v{d.get('harness_version')} " + _kv(d.get("metrics") or {})
    if t == "PolicyUpdated":
        return f"policy v{d.get('policy_version')} {d.get('digest', '')[:12]}"
    if t == "EvalCompleted":
        return f"{d.get('split')} n={d.get('n')} " + _kv(d.get("metrics") or {})
    if t == "FailureDiagnosed":
        return f"{d.get('kind')} [{d.get('severity')}] by {d.get('diagnostic')} " + _kv(d.get("stats") or {}, limit=3)
    if t == "InterventionProposed":
        return f"{d.get('kind')}/{d.get('name')} {_kv(d.get('params') or {}, limit=4)} → {','.join(d.get('targets') or [])}"
    if t in ("BacktestPassed", "BacktestFailed", "BacktestInconclusive"):
        ci = d.get("ci")
        return f"{d.get('mode')} n={d.get('n')}" + (f" CI [{_n(ci[0])}, {_n(ci[1])}]" if ci else "") + " " + _kv(d.get("figures") or {}, limit=3)
    if t == "Promoted":
        return (f"{d.get('subject')} {str(d.get('subject_id'))[:12]} by {d.get('gate')}: harness "
                f"v{d.get('harness_version_before')}→v{d.get('harness_version_after')} " + "; ".join(d.get("reasons") or []))
    if t == "Rejected":
        return f"{d.get('subject')} {str(d.get('subject_id'))[:12]} by {d.get('gate')}: " + "; ".join(d.get("reasons") or [])
    if t == "SkillRegistered":
        return f"{d.get('skill_id')} {d.get('name')}"
    if t == "PluginFailed":
        return f"{d.get('plugin')} in {d.get('hook')}: {d.get('error_type')}: {d.get('message', '')[:80]}"
    return _kv({k: v for k, v in d.items() if k not in ("run_id", "event_id", "caused_by", "emitted_by")}, limit=5)


class TailFormatter:
    """Turns stored records into lines; collapses each step's rollouts into one summary."""

    def __init__(self, per_rollout: bool = False) -> None:
        self.per_rollout = per_rollout
        self._batch: list[dict] = []
        self._batch_step: Optional[int] = None
        self._first_pos = 0

    def _summary(self) -> Optional[str]:
        if not self._batch:
            return None
        b = self._batch
        rewards = [r["reward"] for r in b if r.get("reward") is not None]
        labelled = [r["strict_correct"] for r in b if r.get("strict_correct") is not None]
        infra = sum(1 for r in b if r.get("infra_error"))
        mean_len = sum(r.get("length", 0) for r in b) / len(b)
        parts = [f"[dim]#{self._first_pos:<7}[/] [dim]step {self._batch_step:<5} {len(b)} rollouts[/]",
                 f"reward={_n(sum(rewards) / len(rewards)) if rewards else '–'}",
                 f"strict={_n(sum(labelled) / len(labelled)) if labelled else '–'}", f"len={mean_len:.1f}"]
        if infra:
            parts.append(f"[red]infra_errors={infra}[/]")
        self._batch, self._batch_step = [], None
        return " ".join(parts)

    def feed(self, rec: StoredEvent) -> Iterator[str]:
        d = rec.data()
        if rec.type == "evo.RolloutCompleted" and not self.per_rollout:
            if self._batch and d.get("step") != self._batch_step:
                s = self._summary()
                if s:
                    yield s
            if not self._batch:
                self._first_pos = rec.version
            self._batch_step = d.get("step")
            self._batch.append(d)
            return
        s = self.flush()
        if s:
            yield s
        colour = COLOURS.get(rec.type, "white")
        step = d.get("step")
        where = f"step {step:<5}" if isinstance(step, int) else " " * 10
        name = rec.type.split(".", 1)[-1] if rec.type.startswith("evo.") else rec.type
        yield f"[dim]#{rec.version:<7}[/] [dim]{where}[/] [{colour}]{name:<20}[/] {escape(describe(rec.type, d))}"

    def flush(self) -> Optional[str]:
        return self._summary()


class JsonTailFormatter:
    """``evo tail --json``: every event (rollouts included) as one JSON object per line,
    shaped like ``evo log --json``."""

    def feed(self, rec: StoredEvent) -> Iterator[str]:
        yield json.dumps({"version": rec.version, "position": rec.position, "type": rec.type,
                          "schema_version": rec.schema_version, "event_id": rec.event_id, "hash": rec.hash,
                          "data": rec.data()}, ensure_ascii=False)

    def flush(self) -> Optional[str]:
        return None


def tail(store: Any, run_id: str, out: Console, *, last: int = 10, follow: bool = True, until_finished: bool = True,
         per_rollout: bool = False, wait: float = 0.0, poll: float = 0.2, stop=None, as_json: bool = False) -> int:
    """Print the last ``last`` events, then follow. Returns the number of lines printed.
    ``as_json``: JSON lines written as they are (no markup, no collapsing)."""
    stream = run_stream(run_id)
    deadline = time.monotonic() + wait
    while store.stream_version(stream) == 0:
        if time.monotonic() >= deadline:
            known = store.runs()
            raise AuditError(f"unknown run {run_id!r} in {store.url} (runs: {', '.join(known[:8]) or 'none'})")
        time.sleep(poll)
    fmt: Any = JsonTailFormatter() if as_json else TailFormatter(per_rollout)

    def emit(line: str) -> None:
        if as_json:
            out.file.write(line + "\n")
            out.file.flush()  # a follower reads each event as it lands
        else:
            out.print(line)

    lines = 0
    head = store.stream_version(stream)
    past = list(store.read_stream(stream, from_version=max(1, head - last + 1) if last > 0 else head + 1))
    finished = False
    pos = 0
    for rec in past:
        pos = rec.position
        finished = finished or rec.type == "evo.RunFinished"
        for line in fmt.feed(rec):
            emit(line)
            lines += 1
    if not past:  # -n 0: start from the current head
        tail_rec = list(store.read_stream(stream, from_version=head))
        pos = tail_rec[-1].position if tail_rec else 0
    if not follow or (finished and until_finished):
        s = fmt.flush()
        if s:
            emit(s)
            lines += 1
        return lines
    for rec in store.follow(pos, poll_interval=poll, stream=stream,
                            stop=(lambda: finished and until_finished) if stop is None else stop):
        for line in fmt.feed(rec):
            emit(line)
            lines += 1
        if rec.type == "evo.RunFinished":
            finished = True
            if until_finished:
                break
    s = fmt.flush()
    if s:
        emit(s)
        lines += 1
    return lines
