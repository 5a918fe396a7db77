"""Retirement: a promoted change whose targeted statistic did not fall within two windows
is switched off (and its skill retired): it did not do what it predicted.

A collaborator of the harness pass: it returns the events for one promoted change."""

from __future__ import annotations

from typing import Sequence

from evo_core.harness.emit import ENGINE
from evo_core.state import ActiveIntervention, HarnessState
from evo_events import Event, FailureDiagnosed, InterventionReverted, SkillRetired


def due(active: ActiveIntervention, step: int, window_steps: int) -> bool:
    return step - active.step >= 2 * window_steps


def retirement(run_id: str, step: int, state: HarnessState, proposal_id: str, active: ActiveIntervention, now: float,
               findings: Sequence[FailureDiagnosed]) -> list[Event]:
    """The events that retire ``active`` when its targeted statistic is still up (``now``,
    measured on the current window), else none."""
    before = active.value or 0.0
    if not (now > 0 and now >= before):
        return []
    reason = (f"fingerprint check failed: {'/'.join(active.targets)} still at {now:.3f} "
              f"(was {before:.3f} when promoted at step {active.step})")
    h = state.harness_version
    out: list[Event] = []
    if active.skill_id and active.skill_id in state.skills and not state.skills[active.skill_id].retired:
        out.append(SkillRetired(run_id=run_id, skill_id=active.skill_id, reason=reason, step=step,
                                evidence=tuple(d.event_id for d in findings if d.kind in active.targets),
                                emitted_by=ENGINE))
    out.append(InterventionReverted(run_id=run_id, proposal_id=proposal_id, step=step, harness_version_before=h,
                                    harness_version_after=h + 1, reason=reason, emitted_by=ENGINE))
    return out


__all__ = ["due", "retirement"]
