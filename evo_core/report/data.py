"""One pass over a run's stream → the (small) data the report plots.

Rollouts are the bulk of a log, so they are read as raw JSON (no typed decode) and
folded into per-step sums at once; only per-step aggregates and decision events are
kept, never raw rows.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Callable, Optional

import attrs

from evo_core.audit.errors import AuditError
from evo_core.audit.index import require_run
from evo_events import BACKTEST_RESULT_TYPES, backtest_decision_of

# Older logs call the validation split "heldout"; the report shows both as "validation".
SPLIT_ALIASES = {"heldout": "validation", "val": "validation", "valid": "validation"}
SEVERITY_RANK = {"info": 0, "warning": 1, "invalid": 2}


def split_name(split: Any) -> str:
    s = str(split or "validation")
    return SPLIT_ALIASES.get(s, s)


def _policy_version(subject_id: Any) -> Optional[int]:
    try:
        return int(subject_id)
    except (TypeError, ValueError):
        return None


@attrs.define
class StepAgg:
    n: int = 0
    reward_sum: float = 0.0
    reward_n: int = 0
    length_sum: float = 0.0
    truncated: int = 0
    entropy_sum: float = 0.0
    entropy_n: int = 0
    strict_sum: int = 0
    strict_n: int = 0
    infra: int = 0


@attrs.define
class RunData:
    run_id: str
    events: int = 0
    config: dict[str, Any] = attrs.Factory(dict)
    mode: str = ""
    status: str = "running"
    started_at: str = ""
    steps: dict[int, StepAgg] = attrs.Factory(lambda: defaultdict(StepAgg))
    step_metrics: dict[str, dict[int, float]] = attrs.Factory(lambda: defaultdict(dict))
    evals: dict[str, dict[int, float]] = attrs.Factory(lambda: defaultdict(dict))  # "split/metric" -> step -> value
    # main-branch evals: split -> policy version -> (step, metrics); what the main line is judged by
    evals_by_policy: dict[str, dict[int, tuple[int, dict[str, float]]]] = attrs.Factory(lambda: defaultdict(dict))
    main_policy: Optional[int] = None  # the policy version the last Promoted(subject="policy") names
    policy_gated: bool = False  # the log has policy decisions, so it says which checkpoint is the main line
    diagnoses: dict[str, dict[int, int]] = attrs.Factory(lambda: defaultdict(lambda: defaultdict(int)))
    diag_severity: dict[str, dict[int, str]] = attrs.Factory(lambda: defaultdict(dict))  # kind -> step -> worst
    invalid_diagnoses: int = 0
    last_step: int = 0
    decisions: list[dict[str, Any]] = attrs.Factory(list)
    harness_steps: list[tuple[int, int]] = attrs.Factory(list)  # (step, harness version after a change)
    skills: dict[str, dict[str, Any]] = attrs.Factory(dict)
    plugin_failures: int = 0
    verified: Optional[bool] = None
    verify_problem: Optional[str] = None
    oracle_after_last_step: dict[str, float] = attrs.Factory(dict)  # RunFinished's oracle labels after the last step


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def collect(store: Any, run_id: str, *, progress: Optional[Callable[[int], None]] = None) -> RunData:
    stream = require_run(store, run_id)
    data = RunData(run_id)
    proposals: dict[str, dict[str, Any]] = {}
    backtests: dict[str, list[dict[str, Any]]] = defaultdict(list)
    diag_by_id: dict[str, dict[str, Any]] = {}
    steps = data.steps
    n = 0
    step = 0  # the step of the last event that names one (SkillRegistered does not)
    for rec in store.read_stream(stream):
        n += 1
        if progress is not None and n % 50_000 == 0:
            progress(n)
        t = rec.type
        if t == "evo.RolloutCompleted":
            d = rec.data()
            a = steps[d["step"]]
            a.n += 1
            r = d.get("reward")
            if r is not None:
                a.reward_sum += r
                a.reward_n += 1
            else:
                a.infra += 1
            a.length_sum += d.get("length") or 0
            if d.get("truncated"):
                a.truncated += 1
            e = (d.get("signals") or {}).get("entropy")
            if isinstance(e, (int, float)):
                a.entropy_sum += e
                a.entropy_n += 1
            s = d.get("strict_correct")
            if s is not None:
                a.strict_sum += 1 if s else 0
                a.strict_n += 1
            continue
        if t == "evo.PolicyUpdated":
            continue
        d = rec.data()
        if isinstance(d.get("step"), int):
            step = d["step"]
        if t == "evo.StepCompleted":
            for k, v in (d.get("metrics") or {}).items():
                v = _num(v)
                if v is not None:
                    data.step_metrics[k][d["step"]] = v
        elif t == "evo.EvalCompleted":
            split = split_name(d.get("split"))
            metrics = {k: float(v) for k, v in (d.get("metrics") or {}).items() if _num(v) is not None}
            for k, v in metrics.items():
                data.evals[f"{split}/{k}"][d["step"]] = v
            if d.get("branch", "main") == "main":
                data.evals_by_policy[split][d.get("policy_version", d["step"])] = (d["step"], metrics)
        elif t == "evo.FailureDiagnosed":
            data.diagnoses[d["kind"]][d["step"]] += 1
            worst = data.diag_severity[d["kind"]].get(d["step"], "info")
            sev = d.get("severity", "info")
            data.invalid_diagnoses += sev == "invalid"
            if SEVERITY_RANK.get(sev, 0) >= SEVERITY_RANK.get(worst, 0):
                data.diag_severity[d["kind"]][d["step"]] = sev
            diag_by_id[d["event_id"]] = d
        elif t == "evo.InterventionProposed":
            proposals[d["event_id"]] = d
        elif t in BACKTEST_RESULT_TYPES:
            d["passed"] = backtest_decision_of(t, d.get("figures"))
            backtests[d["proposal_id"]].append(d)
        elif t in ("evo.Promoted", "evo.Rejected"):
            promoted = t == "evo.Promoted"
            prop = proposals.get(d["subject_id"]) if d.get("subject") == "intervention" else None
            diags = [diag_by_id[c] for c in (prop or {}).get("caused_by", []) if c in diag_by_id]
            data.decisions.append({
                "id": d["event_id"], "version": rec.version, "decision": "promoted" if promoted else "rejected",
                "subject": d.get("subject"), "subject_id": d.get("subject_id"), "step": d.get("step"), "gate": d.get("gate"),
                "reasons": d.get("reasons") or [], "figures": d.get("figures") or {},
                "harness_before": d.get("harness_version_before", d.get("harness_version")),
                "harness_after": d.get("harness_version_after", d.get("harness_version")),
                "skill_id": d.get("skill_id"), "proposal": prop, "backtests": backtests.get(d["subject_id"], []),
                "diagnoses": diags,
            })
            if d.get("subject") == "policy":
                data.policy_gated = True
                if promoted:
                    data.main_policy = _policy_version(d.get("subject_id"))
            if promoted:
                data.harness_steps.append((d["step"], d["harness_version_after"]))
                sk = d.get("skill_id")
                if sk and sk in data.skills:
                    data.skills[sk]["uses"] += 1
        elif t == "evo.InterventionReverted":
            data.harness_steps.append((d["step"], d["harness_version_after"]))
        elif t == "evo.SkillRegistered":
            data.skills[d["skill_id"]] = {"skill_id": d["skill_id"], "name": d["name"], "bundle": d.get("bundle") or {},
                                          "source_run": d.get("source_run"), "uses": 0, "retired": False,
                                          "registered_at": rec.version, "step": step, "provenance": d.get("provenance") or {}}
        elif t == "evo.SkillRetired":
            if d["skill_id"] in data.skills:
                data.skills[d["skill_id"]]["retired"] = True
                data.skills[d["skill_id"]]["retired_reason"] = d.get("reason", "")
        elif t == "evo.RunStarted":
            data.config = d.get("config") or {}
            data.mode = d.get("harness_mode", "")
            data.started_at = d.get("started_at", "")
        elif t == "evo.RunFinished":
            data.status = d.get("status", "")
            if data.status == "completed":
                data.oracle_after_last_step = dict((d.get("summary") or {}).get("oracle_labels_after_last_step") or {})
            if isinstance(d.get("step"), int):
                data.last_step = max(data.last_step, d["step"])
        elif t == "evo.PluginFailed":
            data.plugin_failures += 1
    data.events = n
    data.last_step = max([data.last_step, step, *data.steps, *(k for v in data.step_metrics.values() for k in v)])
    if n == 0:
        raise AuditError(f"run {run_id!r} has no events")
    return data


def step_series(data: RunData) -> dict[str, dict[int, float]]:
    """Per-step curves from the rollout aggregates; logged step metrics take precedence."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for s, a in data.steps.items():
        if a.reward_n:
            out["reward"][s] = a.reward_sum / a.reward_n
        if a.n:
            out["length"][s] = a.length_sum / a.n
            out["truncation"][s] = a.truncated / a.n
        if a.entropy_n:
            out["entropy"][s] = a.entropy_sum / a.entropy_n
        if a.strict_n:
            out["train_strict"][s] = a.strict_sum / a.strict_n
    aliases = {"reward": ("reward_mean", "reward"), "entropy": ("entropy", "entropy_mean"),
               "length": ("length_mean", "response_length", "length"), "truncation": ("truncation_rate", "truncated_frac", "truncation")}
    for name, keys in aliases.items():
        for k in keys:
            if k in data.step_metrics and data.step_metrics[k]:
                out[name] = dict(data.step_metrics[k])
                break
    return out


def downsample(points: dict[int, float], max_points: int) -> list[tuple[float, float]]:
    """Bucket means over step ranges: at most ``max_points`` points, order kept."""
    xs = sorted(points)
    if len(xs) <= max_points:
        return [(float(x), points[x]) for x in xs]
    out = []
    size = len(xs) / max_points
    for b in range(max_points):
        chunk = xs[int(b * size): int((b + 1) * size)]
        if chunk:
            out.append((sum(chunk) / len(chunk), sum(points[x] for x in chunk) / len(chunk)))
    return out


def smooth(points: dict[int, float], window: int) -> dict[int, float]:
    """Centred moving mean over ``window`` consecutive points (fewer at the ends)."""
    xs = sorted(points)
    if window <= 1 or len(xs) < 3:
        return {x: points[x] for x in xs}
    prefix = [0.0]
    for x in xs:
        prefix.append(prefix[-1] + points[x])
    half = window // 2
    out = {}
    for i, x in enumerate(xs):
        lo, hi = max(0, i - half), min(len(xs), i + half + 1)
        out[x] = (prefix[hi] - prefix[lo]) / (hi - lo)
    return out


def load_benchmark(path: Any) -> dict[str, dict[str, float]]:
    """An evolution benchmark's JSON → {"fixed": {metric: value}, "evolving": {...}}.

    Accepts ``{"fixed": {...}, "evolving": {...}}`` (metrics directly or under
    ``"metrics"``), or a list of runs (``{"runs": [...]}`` or a bare list) each with a
    ``harness``/``mode`` key, averaged per mode.
    """
    try:
        raw = json.loads(open(path).read())
    except OSError as exc:
        raise AuditError(f"benchmark file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise AuditError(f"benchmark file {path} is not valid JSON: {exc}") from None

    def flat(d: Any) -> dict[str, float]:
        if isinstance(d, dict) and isinstance(d.get("metrics"), dict):
            d = d["metrics"]
        if not isinstance(d, dict):
            return {}
        out = {}
        for k, v in d.items():
            if isinstance(v, dict) and "mean" in v:  # {"mean": …, "std": …} summaries
                v = v["mean"]
            if _num(v) is not None:
                out[k] = float(v)
        return out

    if isinstance(raw, dict) and isinstance(raw.get("harnesses"), dict):  # benchmarks/evolution.py --json
        raw = raw["harnesses"]
    if isinstance(raw, dict) and "fixed" in raw and "evolving" in raw:
        return {"fixed": flat(raw["fixed"]), "evolving": flat(raw["evolving"])}
    rows = raw.get("runs") or raw.get("results") if isinstance(raw, dict) else raw
    if isinstance(rows, list):
        acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if isinstance(r, dict):
                mode = r.get("harness") or r.get("mode") or r.get("harness_mode")
                if mode in ("fixed", "evolving"):
                    for k, v in flat(r).items():
                        acc[mode][k].append(v)
        if "fixed" in acc and "evolving" in acc:
            return {m: {k: sum(v) / len(v) for k, v in acc[m].items()} for m in ("fixed", "evolving")}
    raise AuditError(f"benchmark file {path}: expected fixed and evolving results "
                     '({"fixed": {...}, "evolving": {...}} or a list of runs with "harness": "fixed"|"evolving")')
