"""The main line: which checkpoint training keeps, and going back to it.

At each validation evaluation the policy gate decides whether the evaluated checkpoint
joins the main line (``Promoted(subject="policy")``, with its weights persisted through the
harness port so a rollback or a resume restores exactly that policy). A rejection may also
send training back to the main line: with ``restore_on = "veto"`` (the evolving default)
only when a validity veto fired, with ``"reject"`` after any rejection, never with
``"never"`` (the fixed default: a static recipe trains one line and only picks which
checkpoint to ship). A restore is an event, ``PolicyUpdated(target="restore")``, that the
loop carries out once the pass is committed.

A collaborator of the harness pass: it reads the state and evidence it is given and
returns candidates, figures and events.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from evo_core.api import Candidate, strict_metric
from evo_core.harness.config import HarnessConfig
from evo_core.harness.emit import ENGINE
from evo_core.harness.gating import Verdict, blob_ref
from evo_core.harness.window import EvidenceWindow
from evo_core.state import DiagnosisRecord, HarnessState
from evo_events import EvalCompleted, FailureDiagnosed, PolicyUpdated


def gate_due(config: HarnessConfig, state: HarnessState, step: int, evidence: EvidenceWindow,
             new_evals: Sequence[EvalCompleted]) -> bool:
    policy = config.gates.get("policy") or {}
    if policy.get("enabled", True) is False:
        return False
    every = config.policy_gate_every
    if every == 0:
        return bool(new_evals)
    return step - state.last_gate_step >= every and bool(evidence.evals)


def records(findings: Sequence[FailureDiagnosed]) -> list[DiagnosisRecord]:
    return [DiagnosisRecord(d.event_id, d.step, d.kind, d.severity, d.diagnostic, d.diagnostic_version,
                            d.stats.get("value") if isinstance(d.stats.get("value"), (int, float)) else None)
            for d in findings]


def restore_on(config: HarnessConfig) -> str:
    return (config.gates.get("policy") or {}).get("restore_on") or ("veto" if config.evolving else "never")


def wants_restore(config: HarnessConfig, state: HarnessState, v: Verdict) -> bool:
    """After a rejected checkpoint: whether training goes back to the main line."""
    mode = restore_on(config)
    return not v.accepted and (mode == "reject" or (mode == "veto" and v.vetoed)) \
        and state.policy_version != state.main.policy_version


def restore_event(run_id: str, step: int, state: HarnessState, caused_by: tuple[str, ...]) -> Optional[PolicyUpdated]:
    """Training goes back to the main line's weights (under a new policy version); None when
    the main line has no persisted weights."""
    main = state.main
    if main.checkpoint is None:
        return None
    return PolicyUpdated(run_id=run_id, step=step, policy_version=state.max_policy_version + 1,
                         digest=main.digest, checkpoint=blob_ref(main.checkpoint), target="restore",
                         caused_by=caused_by, emitted_by=ENGINE)


def candidate(state: HarnessState, evidence: EvidenceWindow, ev: EvalCompleted, step: int) -> Candidate:
    """The evaluated checkpoint as the policy gate's candidate, against the main line."""
    main_reward = state.main.train_reward
    if main_reward is None and state.main.policy_version == 0:
        main_reward = evidence.mean_reward(-1) if state.last_gate_step == 0 else None
    return Candidate(subject="policy", subject_id=str(ev.policy_version), step=step, eval=ev,
                     main_eval=evidence.eval_by_id(state.main.eval_id),
                     train_reward=evidence.mean_reward(state.last_gate_step), main_train_reward=main_reward,
                     rollouts=tuple(r for r in evidence.rollouts() if r.step > state.last_gate_step))


def figures(config: HarnessConfig, state: HarnessState, cand: Candidate) -> dict[str, Any]:
    metric = (config.gates.get("policy") or {}).get("metric")
    return {"candidate_strict": strict_metric(cand.eval, metric), "main_strict": strict_metric(cand.main_eval, metric),
            "train_reward": cand.train_reward, "main_train_reward": cand.main_train_reward,
            "main_policy_version": state.main.policy_version, "restore_on": restore_on(config)}


__all__ = ["gate_due", "records", "restore_on", "wants_restore", "restore_event", "candidate", "figures"]
