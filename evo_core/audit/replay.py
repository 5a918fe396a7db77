"""Counterfactual replay: the live harness engine, run again over a run's recorded evidence.

For each step of the run the replay does what the run loop did before committing it: it
folds the step's trainer events (everything the trainer logged up to the step's harness
work) into the replay's own ``HarnessState``, adds the step's rollouts and evaluations to
an ``EvidenceWindow``, and runs ``HarnessEngine.new_pass`` — the live engine's pass, with the run's
``[harness]`` table overlaid with the SPEC (``ReplaySpec.overlay``), and with the run's
recorded online backtests and main-line snapshots standing in for the trainer
(``RecordedPort``). The pass's events are folded into the replay's state; the recorded
harness events never are. So the trajectory (rollouts, evaluations, weights) stays the one
the run recorded, while the decisions are the replayed harness's own, and its later passes
see its own ledger, interventions and main line.

The replayed decisions are then compared with the recorded ones (``replay_diff``):
diagnoses that appear or vanish, decisions that flip, and each pass's events against the
recorded ones. A replay with the run's own harness (an empty SPEC) reproduces the run's
harness events exactly, apart from event ids.

Replay reads the source run only. Results go to a separate stream ``replay-<run>-<id>``
(see ``evo_core.audit.events``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import itertools
import time
import uuid
from typing import Any, Callable, Optional

import attrs
import structlog

import evo_core
from evo_events import (
    EvalCompleted,
    Event,
    FailureDiagnosed,
    HarnessPassCompleted,
    PluginFailed,
    RolloutCompleted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepCompleted,
)
from evo_core.harness import Catalog, HarnessConfig, HarnessConfigError, HarnessEngine, PassInput
from evo_core.harness.emit import ENGINE_VERSION
from evo_core.harness.window import EvidenceWindow
from evo_core.state import HarnessState, apply, fold
from evo_core.store import put_json

from evo_core.audit.errors import AuditError
from evo_core.audit.events import AUDIT_EMITTER, ReplayCompleted, replay_stream
from evo_core.audit.index import RunIndex
from evo_core.audit.recorded import is_trainers, recorded_stand_ins
from evo_core.audit.replay_diff import IdMap, decisions, diagnosis_keys, first_difference, flips
from evo_core.audit.replay_result import CFinding, ReplayedPass, ReplayResult
from evo_core.audit.spec import DiagnosticItem, ReplaySpec

log = structlog.get_logger("evo.replay")

# --- the replay ------------------------------------------------------------------------------------


@attrs.define
class _Batch:
    """A step's trainer events as the loop handed them to the harness."""

    step: int
    rollouts: list[RolloutCompleted] = attrs.Factory(list)
    step_event: Optional[StepCompleted] = None
    evals: list[EvalCompleted] = attrs.Factory(list)

    def ended_by(self, ev: Event) -> bool:
        if isinstance(ev, (RolloutCompleted, StepCompleted)):
            return ev.step != self.step or self.step_event is not None
        return isinstance(ev, (RunStarted, RunResumed, RunFinished))


class CounterfactualReplay:
    """One replay of a run; see the module docstring."""

    def __init__(self, store: Any, run_id: str, spec: ReplaySpec, pm: Any, *, window_steps: Optional[int] = None,
                 every: Optional[int] = None, index: Optional[RunIndex] = None,
                 progress: Optional[Callable[[int, int], None]] = None) -> None:
        if (window_steps is not None and window_steps < 1) or (every is not None and every < 1):
            raise AuditError("--window and --every must be at least 1")
        self.store = store
        self.index = index or RunIndex(store, run_id)
        self.run_id = run_id
        self.spec = spec
        self.catalog = Catalog.from_plugins(pm)
        first = self.index.event(0)
        if not isinstance(first, RunStarted):
            raise AuditError(f"run {run_id!r}: the log does not begin with RunStarted")
        self.started = first
        self.window_steps, self.every = window_steps, every
        self.progress = progress

    # -- the replayed harness's config --------------------------------------------------------------
    def harness_table(self, *, find_bad: bool, notes: list[str]) -> dict[str, Any]:
        """The run's own ``[harness]`` table with the SPEC (and, for ``find_bad``, the
        diagnostics the run had promoted by its end) laid over it."""
        own = dict((self.started.config or {}).get("harness") or {})
        try:
            HarnessConfig.from_dict(own)
        except HarnessConfigError as exc:  # an older log's config: the defaults, said out loud
            notes.append(f"the run's [harness] config does not parse ({exc}); replaying with the defaults")
            own = {"mode": self.started.harness_mode}
        spec = self.spec
        if find_bad:
            spec = ReplaySpec(tuple(self._later_diagnostics(notes))).merged(spec)
        table = spec.overlay(own, self.catalog.diagnostics, self.catalog.gates)
        if self.window_steps is not None:
            table["window_steps"] = self.window_steps
        if self.every is not None:
            table["diagnose_every"] = self.every
        return table

    def _later_diagnostics(self, notes: list[str]) -> list[DiagnosticItem]:
        """The diagnostic revisions the run had promoted by its end (the later harness)."""
        final = fold(self.index.event(i) for i in self.index.sparse())
        out = []
        for name, setting in final.diagnostics.items():
            if setting.source == "config":
                continue
            if setting.spec:
                out.append(DiagnosticItem(name, setting.version, dict(setting.params), dict(setting.spec), source="later harness"))
            elif name in self.catalog.diagnostics:
                out.append(DiagnosticItem(name, None, dict(setting.params), source="later harness"))
            else:
                notes.append(f"later-harness diagnostic {name!r} is not installed; not replayed")
        return out

    def _versions(self, cfg: HarnessConfig) -> dict[str, str]:
        out: dict[str, str] = {}
        cat = self.catalog
        for name, params in cfg.diagnostics.items():
            if params.get("enabled", True) is False:
                continue
            if params.get("spec"):
                out[name] = str(params.get("version") or "spec")
            elif name in cat.diagnostics:
                out[name] = str(cat.diagnostics[name].version)
        for prefix, table, installed in (("gate", cfg.gates, cat.gates), ("proposer", cfg.proposers, cat.proposers)):
            for name, params in table.items():
                if params.get("enabled", True) is not False and name in installed:
                    out[f"{prefix}:{name}"] = str(installed[name].version)
        for name in cfg.backtest.plan or sorted(cat.backtesters):
            if name in cat.backtesters:
                out[f"backtester:{name}"] = str(cat.backtesters[name].version)
        out["harness_engine"] = ENGINE_VERSION
        out["evo_core"] = evo_core.__version__
        return out

    # -- driving the engine ---------------------------------------------------------------------------
    def drive(self, engine: HarnessEngine, started: RunStarted) -> tuple[list[ReplayedPass], list[Event], dict[str, int], float]:
        """Run ``engine`` over the log, step by step. Returns the passes, any recorded harness
        events logged before the first step, the log position of every recorded harness event,
        and the seconds spent in the engine's passes. Cyclic garbage collection is off meanwhile
        (``no_cyclic_gc``): the replay allocates hundreds of thousands of long-lived events, and
        the collector would rescan them again and again for cycles they do not form."""
        with no_cyclic_gc():
            return self._drive(engine, started)

    def _drive(self, engine: HarnessEngine, started: RunStarted) -> tuple[list[ReplayedPass], list[Event], dict[str, int], float]:
        recs = self.index.records
        n = len(recs)
        tick = max(n // 200, 1)
        run_cfg = started.config.get("run") if isinstance(started.config, dict) else None
        final_step = int((run_cfg or {}).get("steps") or 0)
        stand_ins = recorded_stand_ins(self.index)
        window_steps = engine.config.window_steps
        state = HarnessState()
        win = EvidenceWindow(self.run_id, window_steps)
        passes: list[ReplayedPass] = []
        before: list[Event] = []
        positions: dict[str, int] = {}
        own_diagnoses: list[FailureDiagnosed] = []
        batch: Optional[_Batch] = None
        engine_s = 0.0

        def run_pass() -> None:
            nonlocal batch, engine_s
            b, batch = batch, None
            assert b is not None
            win.add_step(b.step, b.rollouts, b.step_event, b.evals)
            t0 = time.perf_counter()
            out = engine.new_pass(PassInput(step=b.step, state=state, evidence=win, evals=b.evals, port=stand_ins,
                                            final=b.step == final_step, seed=started.seed)).run()
            engine_s += time.perf_counter() - t0
            for ev in out:
                apply(state, ev)
            own_diagnoses.extend(e for e in out if isinstance(e, FailureDiagnosed))
            passes.append(ReplayedPass(b.step, out))

        for i, rec in enumerate(recs):
            if self.progress is not None and i % tick == 0:
                self.progress(i, n)
            ev = rec.decode()
            if not is_trainers(ev):
                if batch is not None:
                    run_pass()
                (passes[-1].recorded if passes else before).append(ev)
                positions[ev.event_id] = i
                continue
            if batch is not None and batch.ended_by(ev):
                run_pass()
            if i == 0:
                ev = started  # the run's start, with the replayed harness's config
            elif isinstance(ev, RunResumed):
                win = self._refilled(i, own_diagnoses, window_steps)
            apply(state, ev)
            if isinstance(ev, (RolloutCompleted, StepCompleted)):
                if batch is None:
                    batch = _Batch(ev.step)
                if isinstance(ev, RolloutCompleted):
                    batch.rollouts.append(ev)
                else:
                    batch.step_event = ev
            elif isinstance(ev, EvalCompleted) and batch is not None and ev.step == batch.step:
                batch.evals.append(ev)
            elif isinstance(ev, EvalCompleted) and batch is None and ev.step == 0:
                win.add_step(0, [], None, [ev])  # the starting checkpoint's evals, as the loop adds them
        if batch is not None:
            run_pass()
        if self.progress is not None:
            self.progress(n, n)
        return passes, before, positions, engine_s

    def _refilled(self, upto: int, own_diagnoses: list[FailureDiagnosed], window_steps: int) -> EvidenceWindow:
        """A resumed loop rebuilds its window from its log: here the recorded trajectory and
        the replay's own diagnoses."""
        win = EvidenceWindow(self.run_id, window_steps)
        trajectory = (e for e in (r.decode() for r in self.index.records[:upto]) if is_trainers(e))
        win.prefill(itertools.chain(trajectory, own_diagnoses))
        return win

    # -- the whole replay -------------------------------------------------------------------------------
    def run(self, *, find_bad: bool = False, write: bool = True, replay_id: Optional[str] = None) -> ReplayResult:
        t0 = time.perf_counter()
        notes: list[str] = []
        table = self.harness_table(find_bad=find_bad, notes=notes)
        try:
            cfg = HarnessConfig.from_dict(table)
        except HarnessConfigError as exc:
            raise AuditError(f"the replayed harness config is invalid: {exc}") from None
        engine = HarnessEngine(cfg, self.catalog, run_id=self.run_id)
        started = attrs.evolve(self.started, config={**dict(self.started.config or {}), "harness": table})
        passes, before, positions, engine_s = self.drive(engine, started)

        recorded_events = before + [e for p in passes for e in p.recorded]
        replayed_events = [e for p in passes for e in p.replayed]
        rec_diag, rep_diag = diagnosis_keys(recorded_events), diagnosis_keys(replayed_events)
        order = lambda k: (k[1], k[0], k[2])  # noqa: E731
        appeared = [CFinding.of(rep_diag[k]).to_dict() for k in sorted(set(rep_diag) - set(rec_diag), key=order)]
        vanished_keys = set(rec_diag) - set(rep_diag)
        vanished = [{"diagnostic": k[0], "step": k[1], "kind": k[2]} for k in sorted(vanished_keys, key=order)]
        recorded_decisions, replayed_decisions = decisions(recorded_events), decisions(replayed_events)
        by_id = {e.event_id: e for e in recorded_events if isinstance(e, FailureDiagnosed)}
        flipped = flips(recorded_decisions, replayed_decisions, by_id, vanished_keys)

        ids = IdMap()
        divergences = [{"step": 0, "difference": f"{len(before)} recorded harness events before the first step"}] if before else []
        for p in passes:
            diff = first_difference(p.recorded, p.replayed, ids)
            if diff is not None:
                divergences.append({"step": p.step, "difference": diff})

        bad: list[dict[str, Any]] = []
        if find_bad:
            reasons = {f["decision_id"]: f["reasons"] for f in flipped if f["decision_id"]}
            verdicts = {}
            for key, rec in recorded_decisions.items():
                rep = replayed_decisions.get(key)
                verdicts[rec.event.event_id] = (rep.decision if rep else rec.absent, reasons.get(rec.event.event_id, []))
            bad = self._bad_promotions(recorded_decisions.values(), verdicts, positions, cfg.window_steps)
        failures = [f"{e.plugin} {e.hook} at step {e.step}: {e.error_type}: {e.message}"
                    for e in replayed_events if isinstance(e, PluginFailed)]
        result = ReplayResult(
            run_id=self.run_id, replay_id=replay_id or uuid.uuid4().hex[:12], stream=None, spec=self.spec,
            plugin_versions=self._versions(engine.config), window_steps=cfg.window_steps, every=cfg.diagnose_every,
            passes=sum(1 for e in replayed_events if isinstance(e, HarnessPassCompleted) and e.diagnosed),
            events_scanned=len(self.index.records),
            findings=[CFinding.of(e) for e in replayed_events if isinstance(e, FailureDiagnosed)],
            appeared=appeared, vanished=vanished, flips=flipped, bad_promotions=bad, failures=failures, notes=notes,
            divergences=divergences,
            decisions={"recorded_decisions": len(recorded_decisions), "replayed_decisions": len(replayed_decisions)},
            timings={"total_s": round(time.perf_counter() - t0, 3), "engine_s": round(engine_s, 3)},
            find_bad=find_bad, pass_events=passes)
        if write:
            result = attrs.evolve(result, stream=self._write(result, find_bad))
        return result

    def _bad_promotions(self, recorded: Any, verdicts: dict[str, tuple[str, list[str]]], positions: dict[str, int],
                        window: int) -> list[dict[str, Any]]:
        """Promotions the strict oracle's labels call harmful, and whether the later harness blocks them."""
        from evo_core.audit.outcome import assess

        out = []
        for dec in recorded:
            ev = dec.event
            if dec.decision != "promoted":
                continue
            pred = dict(dec.proposal.prediction) if dec.proposal is not None else {}
            targets = tuple(dec.proposal.targets) if dec.proposal is not None else ()
            o = assess(self.index, positions[ev.event_id], ev.step, targets, pred, window)
            if o.strict_held is not None:
                harmful, basis = (not o.strict_held), "strict labels on rollouts"
            elif o.guard_held is not None:
                harmful, basis = (not o.guard_held), f"held-out {o.guard_metric}"
            else:
                continue
            would, reasons = verdicts[ev.event_id]
            blocked = would != "promoted"
            if harmful or blocked:
                out.append({"decision_id": ev.event_id, "subject": ev.subject, "subject_id": ev.subject_id,
                            "step": ev.step, "harmful": harmful, "blocked": blocked, "would": would, "basis": basis,
                            "strict_accuracy": [o.before.strict_accuracy, o.after.strict_accuracy],
                            "exploit_rate": [o.before.exploit_rate, o.after.exploit_rate],
                            "guard": [o.before.guard, o.after.guard], "reasons": reasons,
                            "verdict": "caught" if harmful and blocked else "missed" if harmful else "false alarm"})
        return out

    # -- writing ----------------------------------------------------------------------------------------
    def _write(self, result: ReplayResult, find_bad: bool) -> str:
        stream = replay_stream(self.run_id, result.replay_id)
        head = self.index.records[-1]
        blob = put_json(self.store.blobs, [f.to_dict() for f in result.findings])
        cap = 500  # the full lists are in the findings blob and recomputable; keep the event small
        ev = ReplayCompleted(
            run_id=self.run_id, emitted_by=AUDIT_EMITTER, replay_id=result.replay_id, source_stream=self.index.stream,
            source_head_version=head.version, source_head_hash=head.hash, spec=result.spec.to_dict(),
            plugin_versions=result.plugin_versions,
            settings={"window_steps": result.window_steps, "every": result.every, "find_bad": find_bad,
                      "evo_core": evo_core.__version__, "harness_engine": ENGINE_VERSION},
            summary=result.summary(), appeared=result.appeared[:cap], vanished=result.vanished[:cap],
            flips=result.flips[:cap], bad_promotions=result.bad_promotions[:cap], findings=blob,
            completed_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        )
        self.store.append(stream, [ev], expected_version=0)
        return stream


@contextlib.contextmanager
def no_cyclic_gc():
    """Cyclic garbage collection off for the block, and back as it was afterwards (also when
    the block raises). Reference counting still frees everything that forms no cycle; the
    cycles made meanwhile are collected once the collector is back on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def replay(store: Any, run_id: str, spec: ReplaySpec, pm: Any, *, find_bad: bool = False, write: bool = True,
           window_steps: Optional[int] = None, every: Optional[int] = None, progress=None) -> ReplayResult:
    """Replay run ``run_id`` with the SPEC laid over its harness; see the module docstring."""
    return CounterfactualReplay(store, run_id, spec, pm, window_steps=window_steps, every=every,
                                progress=progress).run(find_bad=find_bad, write=write)
