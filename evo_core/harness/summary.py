"""Run-level outcome figures, read from a run's log (what the suite and the README report).

Everything the harness selected on is *validation*; what is reported is *test*, which nothing
in the harness ever read. Per run:

- test strict accuracy and hack rate of the **main line** (the checkpoint the policy gate kept;
  the last checkpoint when the run has no policy gate) and of the **last checkpoint**;
- the same for **early stopping** over the run's own trajectory: the checkpoint with the best
  validation strict accuracy (the competent practitioner's choice, with no diagnostic acting);
- **wrong-branch promotions**: policy promotions whose *test* accuracy is below that of the main
  line they replaced, by a paired bootstrap over test items whose 95% CI excludes 0 (a drop
  inside the noise is not counted);
- the digest of the weights the run **started** from (the warm start), so that a comparison
  can check that two arms of a seed were paired;
- the step of the first **valid diagnosis** (an invalid-severity diagnosis whose audited evidence
  departs significantly from the base rate of its side in its window: ``evo_core.harness.validity``,
  a one-sided Fisher exact test at 0.05), of the first promoted repair, and the step at which
  test accuracy **collapsed** (fell 0.2 below its start), if it did; and how many invalid-severity
  diagnoses the test found valid, per side;
- its **strict-oracle labels** (``evo_core.trainer.oracle.label_summary``): per purpose, the
  A/B branches' share, the decision-relevant total (what the arm's decisions read) and its
  share of the nominal training rollouts, and the validation labels early stopping over the
  run's trajectory reads; None for a log from before labels were counted.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from evo_core.api import strict_metric
from evo_core.harness.stats import paired_bootstrap
from evo_core.harness.validity import diagnosis_validity
from evo_core.trainer.oracle import label_summary, label_totals
from evo_events import (
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    PolicyUpdated,
    Promoted,
    Rejected,
    RolloutCompleted,
    RunFinished,
    RunStarted,
    SkillRegistered,
    StepCompleted,
)

COLLAPSE_DROP = 0.2
DEFAULT_WINDOW_STEPS = 10  # harness.window_steps when the run's config does not say


def _by_version(evals: Sequence[EvalCompleted]) -> dict[int, EvalCompleted]:
    out: dict[int, EvalCompleted] = {}
    for e in evals:
        out.setdefault(e.policy_version, e)  # the first evaluation of a version (same weights, same seed)
    return out


def summarize_run(events: Iterable[Event], metric: Optional[str] = None) -> dict[str, Any]:
    events = list(events)
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    config = started.config if started else {}
    run_cfg = config.get("run") or {}
    val = [e for e in events if isinstance(e, EvalCompleted) and e.split in ("validation", "heldout") and e.branch == "main"]
    test = [e for e in events if isinstance(e, EvalCompleted) and e.split == "test"]
    test_main = [e for e in test if e.branch == "main"]
    test_of = _by_version(test)
    policy_gate = ((config.get("harness") or {}).get("gates") or {}).get("policy") or {}
    gated = policy_gate.get("enabled", True) is not False
    promotions = [e for e in events if isinstance(e, Promoted) and e.subject == "policy"]
    main_version = int(promotions[-1].subject_id) if promotions else 0
    last = test_main[-1] if test_main else None
    main_test = test_of.get(main_version) if gated else last
    best_val = max(val, key=lambda e: (strict_metric(e, metric) or -1.0, -e.step)) if val else None
    early = test_of.get(best_val.policy_version) if best_val else None

    def acc(e: Optional[EvalCompleted]) -> Optional[float]:
        return strict_metric(e, metric)

    def hack(e: Optional[EvalCompleted]) -> Optional[float]:
        v = e.metrics.get("hack_rate") if e is not None else None
        return float(v) if isinstance(v, (int, float)) else None

    out: dict[str, Any] = {
        "run_id": started.run_id if started else None, "mode": started.harness_mode if started else None,
        "arm": run_cfg.get("arm") or (started.harness_mode if started else None),
        "seed": started.seed if started else None, "code_version": started.code_version if started else None,
        "flaw": ((config.get("task") or {}).get("options") or {}).get("flaw"),
        "status": next((e.status for e in reversed(events) if isinstance(e, RunFinished)), "running"),
        "steps": max((e.step for e in events if isinstance(e, StepCompleted)), default=0),
        # the warm start's weights: arms of one flaw-seed compare paired only when they share it
        "start_digest": next((e.digest for e in events if isinstance(e, PolicyUpdated) and e.policy_version == 0), None),
        "test_main": acc(main_test), "hack_main": hack(main_test),
        "main_policy_version": main_version if gated else (last.policy_version if last else None),
        "test_last": acc(last), "hack_last": hack(last),
        "test_initial": acc(test_main[0]) if test_main else None,
        "test_early_stop": acc(early), "hack_early_stop": hack(early),
        "early_stop_step": best_val.step if best_val else None,
        "validation_main": acc(_by_version(val).get(main_version)), "validation_last": acc(val[-1]) if val else None,
    }
    out.update(_wrong_branches(promotions, val, test_of, metric))
    window = int(((config.get("harness") or {}).get("window_steps")) or DEFAULT_WINDOW_STEPS)
    out.update(_timing(events, test_main, metric, window))
    out.update(_counts(events))
    out.update(_labels(events, config))
    return out


def _labels(events: Sequence[Event], config: dict[str, Any]) -> dict[str, Any]:
    run, ev = config.get("run") or {}, config.get("eval") or {}
    schedule = {"steps": run.get("steps"), "eval_every": run.get("eval_every"), "samples": ev.get("samples", 4),
                "greedy": ev.get("greedy", True),
                "validation_evals": sum(1 for e in events if isinstance(e, EvalCompleted) and e.split == "validation"
                                        and e.branch == "main")}
    totals = label_totals(events)
    if not totals:  # a log from before every label was counted: unknown, not zero
        return {"oracle_labels": None, "labels_decision": None, "labels_decision_share": None, "eval_schedule": schedule}
    s = label_summary(totals, config)
    return {"oracle_labels": s, "labels_decision": s["decision_relevant"], "labels_decision_share": s["decision_share"],
            "eval_schedule": schedule}


def _wrong_branches(promotions: Sequence[Promoted], val: Sequence[EvalCompleted], test_of: dict[int, EvalCompleted],
                    metric: Optional[str]) -> dict[str, Any]:
    """A promotion is wrong when the promoted checkpoint's *test* accuracy is below the main line
    it replaced with a 95% paired-bootstrap CI (over test items) that excludes 0."""
    main = 0
    wrong, steps, untestable = 0, [], 0
    for p in promotions:
        cand = int(p.subject_id)
        a, b = test_of.get(main), test_of.get(cand)
        if a is None or b is None or not a.item_scores or not b.item_scores:
            untestable += 1
        else:
            boot = paired_bootstrap(a.item_scores, b.item_scores, n_boot=1000, confidence=0.95, seed=cand)
            if boot is not None and boot.ci[1] < 0:
                wrong += 1
                steps.append(p.step)
        main = cand
    return {"wrong_branch_promotions": wrong, "wrong_branch_steps": steps, "policy_promotions": len(promotions),
            "promotions_without_test_eval": untestable}


def _timing(events: Sequence[Event], test_main: Sequence[EvalCompleted], metric: Optional[str],
            window_steps: int = DEFAULT_WINDOW_STEPS) -> dict[str, Any]:
    rollouts = {e.event_id: e for e in events if isinstance(e, RolloutCompleted)}
    by_step: dict[int, list[RolloutCompleted]] = {}
    for r in rollouts.values():
        by_step.setdefault(r.step, []).append(r)
    first_valid = None
    tested = {"paid": 0, "unpaid": 0}
    valid = {"paid": 0, "unpaid": 0}
    for d in events:
        if not isinstance(d, FailureDiagnosed) or d.severity != "invalid":
            continue
        window = [r for s in range(d.step - window_steps + 1, d.step + 1) for r in by_step.get(s, ())]
        v = diagnosis_validity([rollouts[i] for i in d.evidence if i in rollouts], window,
                               side=(d.stats or {}).get("side"))
        if v is None:
            continue
        tested[v.side] += 1
        valid[v.side] += v.valid
        if v.valid and first_valid is None:
            first_valid = d.step
    repair = next((e.step for e in events if isinstance(e, Promoted) and e.subject == "intervention"), None)
    start = strict_metric(test_main[0], metric) if test_main else None
    collapse = next((e.step for e in test_main if start is not None
                     and (strict_metric(e, metric) or 0.0) <= start - COLLAPSE_DROP), None)
    return {"first_valid_diagnosis_step": first_valid, "first_repair_step": repair, "collapse_step": collapse,
            "diagnoses_tested": tested, "diagnoses_valid": valid}


def _counts(events: Sequence[Event]) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    out = {"diagnoses": 0, "invalid_diagnoses": 0, "proposals": 0, "intervention_promotions": 0,
           "intervention_rejections": 0, "policy_rejections": 0, "skills_registered": 0}
    promoted_names: list[str] = []
    proposals = {e.event_id: e for e in events if isinstance(e, InterventionProposed)}
    for e in events:
        if isinstance(e, FailureDiagnosed):
            out["diagnoses"] += 1
            out["invalid_diagnoses"] += e.severity == "invalid"
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        elif isinstance(e, InterventionProposed):
            out["proposals"] += 1
        elif isinstance(e, Promoted) and e.subject == "intervention":
            out["intervention_promotions"] += 1
            if e.subject_id in proposals:
                promoted_names.append(proposals[e.subject_id].name)
        elif isinstance(e, Rejected) and e.subject == "intervention":
            out["intervention_rejections"] += 1
        elif isinstance(e, Rejected) and e.subject == "policy":
            out["policy_rejections"] += 1
        elif isinstance(e, SkillRegistered):
            out["skills_registered"] += 1
    return {**out, "diagnosis_kinds": kinds, "promoted_interventions": promoted_names}
