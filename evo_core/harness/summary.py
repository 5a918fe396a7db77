"""Run-level outcome figures from a log (what benchmarks and the README report).

A *wrong-branch promotion* is a policy promotion whose held-out strict accuracy (the
oracle's labels, as logged in ``EvalCompleted``) is below that of the main line it
replaced. The *final main-line accuracy* is the strict accuracy of the last promoted
checkpoint (the starting checkpoint when nothing was promoted).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from evo_core.api import strict_metric
from evo_events import (
    BacktestFailed,
    BacktestPassed,
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    Promoted,
    Rejected,
    RolloutCompleted,
    RunStarted,
    SkillRegistered,
    SkillRetired,
    StepCompleted,
)


def summarize_run(events: Iterable[Event], metric: Optional[str] = None) -> dict[str, Any]:
    evals: dict[str, EvalCompleted] = {}
    by_version: dict[int, EvalCompleted] = {}
    main_strict: Optional[float] = None
    main_version: Optional[int] = None
    out: dict[str, Any] = {"mode": None, "wrong_branch_promotions": 0, "policy_promotions": 0, "policy_rejections": 0,
                           "intervention_promotions": 0, "intervention_rejections": 0, "diagnoses": 0,
                           "invalid_diagnoses": 0, "proposals": 0, "backtests_passed": 0, "backtests_failed": 0,
                           "skills_registered": 0, "skills_retired": 0, "promoted_interventions": [],
                           "diagnosis_kinds": {}, "wrong_branch_steps": []}
    rewards: list[tuple[int, float]] = []
    first_eval: Optional[EvalCompleted] = None
    last_eval: Optional[EvalCompleted] = None
    for ev in events:
        if isinstance(ev, RunStarted):
            out["mode"] = ev.harness_mode
        elif isinstance(ev, EvalCompleted) and ev.branch == "main":
            evals[ev.event_id] = ev
            by_version[ev.policy_version] = ev
            first_eval = first_eval or ev
            last_eval = ev
            if main_strict is None:
                main_strict, main_version = strict_metric(ev, metric), ev.policy_version
        elif isinstance(ev, StepCompleted):
            r = ev.metrics.get("reward_mean")
            if isinstance(r, (int, float)):
                rewards.append((ev.step, float(r)))
        elif isinstance(ev, FailureDiagnosed):
            out["diagnoses"] += 1
            out["invalid_diagnoses"] += ev.severity == "invalid"
            out["diagnosis_kinds"][ev.kind] = out["diagnosis_kinds"].get(ev.kind, 0) + 1
        elif isinstance(ev, InterventionProposed):
            out["proposals"] += 1
        elif isinstance(ev, BacktestPassed):
            out["backtests_passed"] += 1
        elif isinstance(ev, BacktestFailed):
            out["backtests_failed"] += 1
        elif isinstance(ev, SkillRegistered):
            out["skills_registered"] += 1
        elif isinstance(ev, SkillRetired):
            out["skills_retired"] += 1
        elif isinstance(ev, Promoted):
            if ev.subject == "policy":
                out["policy_promotions"] += 1
                cand = next((evals[c] for c in ev.caused_by if c in evals), None)
                if cand is None:
                    try:
                        cand = by_version.get(int(ev.subject_id))
                    except ValueError:
                        cand = None
                acc = strict_metric(cand, metric)
                if acc is not None and main_strict is not None and acc < main_strict - 1e-12:
                    out["wrong_branch_promotions"] += 1
                    out["wrong_branch_steps"].append(ev.step)
                if acc is not None:
                    main_strict, main_version = acc, cand.policy_version if cand else main_version
            else:
                out["intervention_promotions"] += 1
                out["promoted_interventions"].append(ev.subject_id)
        elif isinstance(ev, Rejected):
            if ev.subject == "policy":
                out["policy_rejections"] += 1
            elif ev.subject == "intervention":
                out["intervention_rejections"] += 1
    tail = [r for _, r in rewards[-max(1, len(rewards) // 10):]]
    out.update(
        final_main_strict=main_strict, final_main_policy_version=main_version,
        initial_strict=strict_metric(first_eval, metric), last_eval_strict=strict_metric(last_eval, metric),
        train_reward_final=sum(tail) / len(tail) if tail else None,
        train_reward_initial=rewards[0][1] if rewards else None,
    )
    return out


def rollout_hedge_rate(events: Iterable[Event], last_steps: int = 10) -> Optional[float]:
    rows = [e for e in events if isinstance(e, RolloutCompleted) and isinstance((e.signals or {}).get("answer_count"), (int, float))]
    if not rows:
        return None
    top = max(r.step for r in rows)
    rows = [r for r in rows if r.step > top - last_steps]
    return sum(1 for r in rows if r.signals["answer_count"] > 1) / len(rows)
