"""The strict oracle, as one client that every oracle label goes through and is counted by.

A label is one (task, completion) pair graded by the domain's ``oracle``. The harness draws
them for several purposes, all decision-relevant except ``test``:

- ``audit``: the sample of training rollouts the harness reads as evidence;
- ``regrade``: rollouts an active intervention sends back to the oracle (within a budget);
- ``train``: every rollout, when the training reward is the oracle itself (the reference arm);
- ``validation``: evaluations that gates, backtests and early stopping read;
- ``test``: the report's evaluations (never read by the harness).

The scope says whose training drew them: ``main`` (the run's own line) or ``branch`` (the
forks an online backtest trains and evaluates). A session and all its forks share one
``LabelCounts``, so a run's totals include every A/B branch.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from evo_core.api import Completion, Task, Verdict
from evo_core.trainer.evaluation import batch_method, grade, grade_many

PURPOSES = ("audit", "regrade", "train", "validation", "test")
SCOPES = ("main", "branch")
METRIC_PREFIX = "oracle_labels"  # a step's metrics: oracle_labels.<scope>.<purpose>


def metric_key(scope: str, purpose: str) -> str:
    return f"{METRIC_PREFIX}.{scope}.{purpose}"


@attrs.define
class LabelCounts:
    """Labels drawn so far, per (scope, purpose), and how many of them a log already holds."""

    drawn: dict[str, int] = attrs.Factory(dict)  # metric_key -> labels
    logged: dict[str, int] = attrs.Factory(dict)  # what ``take_unlogged`` has handed out

    def add(self, scope: str, purpose: str, n: int) -> None:
        if purpose not in PURPOSES:
            raise ValueError(f"oracle purpose must be one of {', '.join(PURPOSES)}, got {purpose!r}")
        if scope not in SCOPES:
            raise ValueError(f"oracle scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        key = metric_key(scope, purpose)
        self.drawn[key] = self.drawn.get(key, 0) + int(n)

    def take_unlogged(self) -> dict[str, float]:
        """Every (scope, purpose) with its labels drawn since the last call (zeros included,
        so each step's metrics have the same keys), marking them as logged."""
        out: dict[str, float] = {}
        for scope in SCOPES:
            for purpose in PURPOSES:
                key = metric_key(scope, purpose)
                out[key] = float(self.drawn.get(key, 0) - self.logged.get(key, 0))
                self.logged[key] = self.drawn.get(key, 0)
        return out

    def total(self, scope: str = "", purpose: str = "") -> int:
        return sum(n for k, n in self.drawn.items()
                   if (not scope or k.split(".")[1] == scope) and (not purpose or k.split(".")[2] == purpose))


class OracleClient:
    """Grades (task, completion) pairs with the domain's strict oracle, in one batch where the
    domain has ``oracle_batch``, and counts each pair as one label of ``purpose``."""

    def __init__(self, domain: Any, *, scope: str = "main", counts: LabelCounts | None = None) -> None:
        if scope not in SCOPES:
            raise ValueError(f"oracle scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        self.domain = domain
        self.scope = scope
        self.counts = counts if counts is not None else LabelCounts()
        self._batch = batch_method(domain, "oracle")

    def grade(self, purpose: str, pairs: Sequence[tuple[Task, Completion]]) -> list[Verdict]:
        verdicts = grade_many(self.domain.oracle, self._batch, self.domain, pairs)
        self.counts.add(self.scope, purpose, len(pairs))
        return verdicts

    def grade_one(self, purpose: str, task: Task, completion: Completion) -> Verdict:
        """One pair through ``oracle`` itself (not the batch method): a re-grade."""
        verdict = grade(self.domain.oracle, self.domain, task, completion)
        self.counts.add(self.scope, purpose, 1)
        return verdict

    def for_branch(self) -> "OracleClient":
        """The client of a backtest fork: the same counts, under the ``branch`` scope."""
        return OracleClient(self.domain, scope="branch", counts=self.counts)


def label_totals(events: Sequence[Any]) -> dict[str, int]:
    """A run's oracle labels by ``scope.purpose``, read from its log: the sum of the
    ``oracle_labels.*`` metrics of its ``StepCompleted`` events plus those its completed
    ``RunFinished`` summary lists for after the last step. Empty for a log without them."""
    out: dict[str, int] = {}

    def add(metrics: Mapping[str, Any]) -> None:
        for k, v in metrics.items():
            if k.startswith(METRIC_PREFIX + ".") and isinstance(v, (int, float)):
                key = k[len(METRIC_PREFIX) + 1:]
                out[key] = out.get(key, 0) + int(v)

    for ev in events:
        kind = type(ev).__name__
        if kind == "StepCompleted":
            add(ev.metrics or {})
        elif kind == "RunFinished" and ev.status == "completed" and isinstance(ev.summary, dict):
            add(ev.summary.get("oracle_labels_after_last_step") or {})
    return out
