"""What runs are compared on: each run's final figures and its comparable curves.

Figures a log does not carry (no test split, no ``hack_rate``, no policy gate) come out
as ``None`` or are missing from the dicts, so that the page simply leaves them out.
"""

from __future__ import annotations

from typing import Optional

import attrs

from evo_core.report.data import RunData, step_series

SPLITS = ("validation", "test")
# The strict metric of an eval, in order of preference (the harness's own list, plus greedy last).
STRICT_KEYS = ("strict_accuracy", "accuracy", "pass_rate", "resolve_rate")
GREEDY = "strict_accuracy_greedy"
HACK = "hack_rate"
END_SHARE = 0.1  # "training reward at the end": the mean over the last tenth of the steps


@attrs.frozen
class FinalFigures:
    run_id: str
    mode: str
    status: str
    steps: int
    events: int
    verified: Optional[bool]
    last_strict: dict[str, tuple[int, float]]  # split -> (step, strict accuracy of the last eval)
    main_version: Optional[int]  # the policy version the log names as the main line
    main_strict: dict[str, float]  # split -> strict accuracy of the main line's eval
    reward_end: Optional[float]
    hack_rate: dict[str, float]  # split -> hack rate of the last eval that reports one
    diagnoses: int
    invalid_diagnoses: int
    interventions: tuple[int, int]  # promoted, rejected
    policies: tuple[int, int]
    skills: int
    oracle_labels: dict[str, int] = attrs.Factory(dict)  # "scope.purpose" -> labels (evo_core.trainer.oracle)


def strict_key(data: RunData, split: str) -> Optional[str]:
    """The strict metric this run logs for ``split`` (None when it has no such eval)."""
    return next((k for k in STRICT_KEYS if data.evals.get(f"{split}/{k}")), None)


def _last(points: dict[int, float]) -> Optional[tuple[int, float]]:
    if not points:
        return None
    s = max(points)
    return s, points[s]


def _main_line(data: RunData) -> tuple[Optional[int], dict[str, float]]:
    """The main line is the last promoted checkpoint, or the starting one when the gate promoted
    none; a log without policy decisions does not say, and gets none."""
    if not data.policy_gated:
        return None, {}
    version = data.main_policy if data.main_policy is not None else 0
    out = {}
    for split in SPLITS:
        got = data.evals_by_policy.get(split, {}).get(version)
        if got is not None:
            v = next((got[1][k] for k in STRICT_KEYS if k in got[1]), None)
            if v is not None:
                out[split] = v
    return version, out


def reward_at_end(data: RunData) -> Optional[float]:
    reward = step_series(data).get("reward") or {}
    if not reward:
        return None
    xs = sorted(reward)
    tail = xs[-max(1, round(len(xs) * END_SHARE)):]
    return sum(reward[x] for x in tail) / len(tail)


def final_figures(data: RunData) -> FinalFigures:
    last_strict, hack = {}, {}
    for split in SPLITS:
        key = strict_key(data, split)
        got = _last(data.evals.get(f"{split}/{key}", {})) if key else None
        if got is not None:
            last_strict[split] = got
        h = _last(data.evals.get(f"{split}/{HACK}", {}))
        if h is not None:
            hack[split] = h[1]
    version, main = _main_line(data)
    count = lambda subject, decision: sum(1 for d in data.decisions  # noqa: E731
                                          if d["subject"] == subject and d["decision"] == decision)
    return FinalFigures(
        run_id=data.run_id, mode=data.mode, status=data.status, steps=data.last_step, events=data.events,
        verified=data.verified, last_strict=last_strict, main_version=version, main_strict=main,
        reward_end=reward_at_end(data), hack_rate=hack,
        diagnoses=sum(sum(v.values()) for v in data.diagnoses.values()),
        invalid_diagnoses=data.invalid_diagnoses,
        interventions=(count("intervention", "promoted"), count("intervention", "rejected")),
        policies=(count("policy", "promoted"), count("policy", "rejected")),
        skills=len(data.skills),
        oracle_labels=oracle_labels(data),
    )


def oracle_labels(data: RunData) -> dict[str, int]:
    """The run's strict-oracle labels by ``scope.purpose``: its steps' ``oracle_labels.*``
    metrics plus what its completed ``RunFinished`` lists after the last step."""
    out: dict[str, int] = {}
    prefix = "oracle_labels."
    for k, per_step in data.step_metrics.items():
        if k.startswith(prefix):
            out[k[len(prefix):]] = out.get(k[len(prefix):], 0) + int(sum(per_step.values()))
    for k, v in data.oracle_after_last_step.items():
        if k.startswith(prefix) and isinstance(v, (int, float)):
            out[k[len(prefix):]] = out.get(k[len(prefix):], 0) + int(v)
    return out


def compared_curves(data: RunData) -> dict[str, dict[int, float]]:
    """The curves a comparison overlays, by name: ``validation``/``test`` (strict), their
    ``…/greedy`` variants, ``reward``, and ``hack/<split>`` (``hack/train`` from step metrics)."""
    out: dict[str, dict[int, float]] = {}
    for split in SPLITS:
        key = strict_key(data, split)
        if key:
            out[split] = data.evals[f"{split}/{key}"]
        if data.evals.get(f"{split}/{GREEDY}"):
            out[f"{split}/greedy"] = data.evals[f"{split}/{GREEDY}"]
        if data.evals.get(f"{split}/{HACK}"):
            out[f"hack/{split}"] = data.evals[f"{split}/{HACK}"]
    if data.step_metrics.get(HACK):
        out["hack/train"] = data.step_metrics[HACK]
    reward = step_series(data).get("reward")
    if reward:
        out["reward"] = reward
    return out
