"""The pay watch: a repair that raises rewards must not become the loophole.

A change that pays what the verifier withheld (a restore, a regrade) is judged by what it
pays. Which rollouts it paid is read from what it changed, never from its name: replaying
the active interventions' reward effects in promotion order on the logged rollouts, the ones
*it* lifted from unpaid (at most ``pay_threshold``) to paid, among those the verifier left
unpaid and training paid (``reward`` vs ``reward_final``). Among the audited ones, the
oracle's rejection rate is compared with its rejection rate among the rollouts the verifier
itself paid, in the same rollouts, by a one-sided Fisher exact test at level ``ALPHA`` (as
``evo_core.harness.validity`` does for a diagnosis). A significantly higher rate means the
repair pays wrong answers more often than the verifier does: it has become a loophole.

Used three ways, with the same figures: live, the harness retires such a change (a
collaborator of the pass, like ``retirement``); the backtests refuse a proposal whose
treatment would do it; and the fold remembers the (intervention, predicate) pair so the
ledger does not propose the same repair again.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api.interventions import RolloutView, params_of
from evo_core.harness.emit import ENGINE
from evo_core.harness.paycheck import PayCheck, lifted, pay_check, verifier_paid
from evo_core.harness.validity import ALPHA
from evo_core.state import ActiveIntervention, HarnessState
from evo_events import Event, InterventionReverted, SkillRetired


def raised_by(acts: Sequence[tuple[str, Any, Mapping[str, Any]]], rows: Sequence[Any],
              pay_threshold: float = 0.0) -> dict[str, set[str]]:
    """Per active change (``(key, intervention, params)``, in promotion order), the ids of
    ``rows`` whose reward its ``new_reward`` effect lifted from unpaid to paid, replaying
    the reward effects in order as the core applies them."""
    views = [RolloutView.of_event(r) for r in rows]
    rewards: dict[str, Optional[float]] = {v.rollout_id: v.reward for v in views}
    out: dict[str, set[str]] = {}
    for key, iv, params in acts:
        if not callable(getattr(iv, "new_reward", None)):
            continue
        p = params_of(iv, params)
        for v in views:
            cur = rewards[v.rollout_id]
            if cur is None:
                continue
            new = iv.new_reward(attrs.evolve(v, reward=cur), p)
            if new is None:
                continue
            if cur <= pay_threshold < float(new):
                out.setdefault(key, set()).add(v.rollout_id)
            rewards[v.rollout_id] = float(new)
    return out


@attrs.frozen
class Watch:
    """One active change's two pay checks, each at half the level (Bonferroni: the pair is
    at ``ALPHA``): what it pays against what the verifier pays in the same steps, and
    against what it would have paid in the window before it was promoted (the evidence it
    was promoted on; none for a change active from the start)."""

    verifier: PayCheck
    before: Optional[PayCheck] = None

    @property
    def checks(self) -> tuple[PayCheck, ...]:
        return (self.verifier,) + ((self.before,) if self.before is not None else ())

    @property
    def loophole(self) -> bool:
        return any(c.loophole for c in self.checks)

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.verifier.evidence

    def describe(self) -> str:
        return "; ".join(c.describe() for c in self.checks if c.loophole) or self.verifier.describe()

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.verifier.to_dict()["check"], "alpha": ALPHA, "correction": "Bonferroni over 2 tests",
                "against_verifier": self.verifier.to_dict(),
                "against_before": self.before.to_dict() if self.before is not None else None}


def watch(state: HarnessState, catalogue: Mapping[str, Any], rows: Sequence[Any], history: Sequence[Any] = (), *,
          window_steps: int = 10, pay_threshold: float = 0.0, alpha: float = ALPHA) -> dict[str, Watch]:
    """The pay checks of every active change that lifted a logged rollout to paid, on the
    ``rows`` logged since it was promoted (its effect was in force on them); ``history``
    supplies the ``window_steps`` steps before its promotion."""
    active = sorted(state.interventions.values(), key=lambda a: (a.since_harness_version, a.proposal_id))
    acts = [(a.proposal_id, catalogue[a.name], dict(a.params)) for a in active if a.name in catalogue]
    rows = [r for r in rows if getattr(r, "split", "train") == "train"]
    candidates = {r.event_id: r for r in lifted(rows, pay_threshold)}
    if not candidates:
        return {}
    level = alpha / 2
    out: dict[str, Watch] = {}
    for pid, ids in raised_by(acts, rows, pay_threshold).items():
        since = state.interventions[pid].step
        raised = [candidates[i] for i in sorted(ids) if i in candidates and candidates[i].step > since]
        if not raised:
            continue
        vs_verifier = pay_check(raised, verifier_paid([r for r in rows if r.step > since], pay_threshold), level,
                                "those the verifier paid in the same steps")
        out[pid] = Watch(vs_verifier, _before(pid, acts, history, since, window_steps, raised, pay_threshold, level))
    return out


def _before(pid: str, acts: Sequence[tuple[str, Any, Mapping[str, Any]]], history: Sequence[Any], since: int,
            window_steps: int, raised: Sequence[Any], pay_threshold: float, level: float) -> Optional[PayCheck]:
    """What the change would have lifted (alone, on the verifier's reward) in the window
    before its promotion, as the control of what it pays now."""
    prior = [r for r in history if getattr(r, "split", "train") == "train" and getattr(r, "infra_error", None) is None
             and since - window_steps < r.step <= since and r.reward is not None and r.reward <= pay_threshold]
    if not prior:
        return None
    (key, iv, params) = next(a for a in acts if a[0] == pid)
    ids = raised_by([(key, iv, params)], prior, pay_threshold).get(key, set())
    would = [r for r in prior if r.event_id in ids]
    if not any(r.strict_correct is not None for r in would):
        return None
    return pay_check(raised, would, level, f"those it would have paid in the {window_steps} steps before its promotion")


def predicate_key(name: str, params: Mapping[str, Any]) -> Optional[str]:
    """The (intervention, predicate) pair the ledger blocks after a pay-watch retirement."""
    pred = params.get("predicate")
    if pred is None:
        return None
    return json.dumps([name, pred], sort_keys=True, separators=(",", ":"), default=str)


def blocked(state: HarnessState, name: str, params: Mapping[str, Any]) -> bool:
    key = predicate_key(name, params)
    return key is not None and key in state.blocked_repairs


def retire_events(run_id: str, step: int, state: HarnessState, active: ActiveIntervention,
                  check: Watch) -> list[Event]:
    """The events that switch off ``active`` because the rollouts it paid are rejected
    significantly more often than the verifier's own."""
    reason = f"pay watch: {active.name} became a loophole: {check.describe()}"
    figures = {**check.to_dict(), "intervention": active.name, "promoted_at": active.step,
               "blocks": predicate_key(active.name, active.params)}
    evidence = check.evidence
    h = state.harness_version
    out: list[Event] = []
    if active.skill_id and active.skill_id in state.skills and not state.skills[active.skill_id].retired:
        out.append(SkillRetired(run_id=run_id, skill_id=active.skill_id, reason=reason, step=step,
                                evidence=tuple(evidence)[:50], emitted_by=ENGINE))
    out.append(InterventionReverted(run_id=run_id, proposal_id=active.proposal_id, step=step, harness_version_before=h,
                                    harness_version_after=h + 1, reason=reason, figures=figures,
                                    caused_by=tuple(evidence)[:50], emitted_by=ENGINE))
    return out


__all__ = ["PayCheck", "Watch", "blocked", "lifted", "pay_check", "predicate_key", "raised_by", "retire_events",
           "verifier_paid", "watch"]
