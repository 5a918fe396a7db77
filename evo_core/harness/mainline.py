"""The main line: which checkpoint training keeps, and going back to it.

At each validation evaluation the policy gate decides whether the evaluated checkpoint
joins the main line (``Promoted(subject="policy")``, with its weights persisted through the
trainer port so a rollback or a resume restores exactly that policy). A rejection may also
send training back to the main line: with ``restore_on = "veto"`` (the evolving default)
only when a validity veto fired, with ``"reject"`` after any rejection, never with
``"never"`` (the fixed default: a static recipe trains one line and only picks which
checkpoint to ship). A restore is an event, ``PolicyUpdated(target="restore")``, that the
loop carries out once the pass is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from evo_core import faults
from evo_core.api import Candidate, GateContext, strict_metric
from evo_core.harness.decisions import ENGINE, blob_ref, decision_events
from evo_core.harness.gating import run_gates, verdict
from evo_core.state import DiagnosisRecord
from evo_events import EvalCompleted, Event, FailureDiagnosed, PolicyUpdated

if TYPE_CHECKING:
    from evo_core.harness.engine import HarnessPass


def gate_due(p: "HarnessPass", new_evals: Sequence[EvalCompleted]) -> bool:
    policy = p.config.gates.get("policy") or {}
    if policy.get("enabled", True) is False:
        return False
    every = p.config.policy_gate_every
    if every == 0:
        return bool(new_evals)
    return p.step - p.state.last_gate_step >= every and bool(p.evidence.evals)


def records(findings: Sequence[FailureDiagnosed]) -> list[DiagnosisRecord]:
    return [DiagnosisRecord(d.event_id, d.step, d.kind, d.severity, d.diagnostic, d.diagnostic_version,
                            d.stats.get("value") if isinstance(d.stats.get("value"), (int, float)) else None)
            for d in findings]


def restore_on(p: "HarnessPass") -> str:
    return (p.config.gates.get("policy") or {}).get("restore_on") or ("veto" if p.config.evolving else "never")


def restore_event(p: "HarnessPass", caused_by: tuple[str, ...]) -> Optional[Event]:
    """Training goes back to the main line's weights (under a new policy version)."""
    main = p.state.main
    if main.checkpoint is None:
        p.iso.missing("main_line_checkpoint", "restore", "the main line's weights")
        return None
    return PolicyUpdated(run_id=p.run_id, step=p.step, policy_version=p.state.max_policy_version + 1,
                         digest=main.digest, checkpoint=blob_ref(main.checkpoint), target="restore",
                         caused_by=caused_by, emitted_by=ENGINE)


def policy_gate(p: "HarnessPass", ev: EvalCompleted, findings: Optional[Sequence[FailureDiagnosed]]) -> None:
    state = p.state
    metric = (p.config.gates.get("policy") or {}).get("metric")
    main_eval = p.evidence.eval_by_id(state.main.eval_id)
    train_reward = p.evidence.mean_reward(state.last_gate_step)
    main_reward = state.main.train_reward
    if main_reward is None and state.main.policy_version == 0:
        main_reward = p.evidence.mean_reward(-1) if state.last_gate_step == 0 else None
    cand = Candidate(subject="policy", subject_id=str(ev.policy_version), step=p.step, eval=ev, main_eval=main_eval,
                     train_reward=train_reward, main_train_reward=main_reward,
                     rollouts=tuple(r for r in p.evidence.rollouts() if r.step > state.last_gate_step))
    active = records(findings) if findings is not None else list(state.active_diagnoses)
    gctx = GateContext(run_id=p.run_id, step=p.step, state=state, config=p.config, diagnoses=tuple(active))
    decisions = run_gates(p.catalog.gates, p.config.gates, cand, gctx, p.iso)
    v = verdict(decisions)
    figures = {"candidate_strict": strict_metric(ev, metric), "main_strict": strict_metric(main_eval, metric),
               "train_reward": train_reward, "main_train_reward": main_reward,
               "main_policy_version": state.main.policy_version, "restore_on": restore_on(p)}
    checkpoint, digest = None, ""
    if v.accepted and p.inp.trainer is not None:
        ok, snap = p.iso.call("trainer", "snapshot", p.inp.trainer.snapshot)
        if ok and snap is not None:
            checkpoint, digest = snap.checkpoint, snap.digest
    elif v.accepted and p.inp.recorded is not None:  # replay: the weights the run persisted, if it promoted them
        snap = p.inp.recorded.snapshot(p.step, ev.policy_version)
        if snap is not None:
            checkpoint, digest = snap.checkpoint, snap.digest
    events = decision_events(p.run_id, p.step, state.harness_version, cand, v, p.engine.versions,
                             caused_by=(ev.event_id,) + tuple(d.event_id for d in active), figures=figures,
                             checkpoint=checkpoint, digest=digest)
    p.emit(*events)
    p.decided += 1
    faults.point("harness.policy_gated")
    mode = restore_on(p)
    if not v.accepted and (mode == "reject" or (mode == "veto" and v.vetoed)) and state.policy_version != state.main.policy_version:
        restore = restore_event(p, (events[0].event_id,))
        if restore is not None:
            p.emit(restore)
