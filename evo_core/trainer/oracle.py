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

The budget (``[harness.oracle] budget``, see ``budget_labels``) caps the *capped* purposes,
``audit``, ``regrade`` and ``validation``, in both scopes together: the labels a harness's
decisions can read. ``train`` (the reference arm's reward is the oracle itself) and ``test``
(report only) are never capped. The cap is enforced here, the one place every label goes
through: a caller asks ``affordable``/``can_pay`` first and shrinks or skips its draw, and
``grade`` refuses a capped draw the budget cannot pay (a caller that forgot to ask is a bug).
What was refused is counted (``oracle_budget.refused.<purpose>`` in the step's metrics), and on
resume the labels spent so far are folded from the log (``LabelCounts.resumed``), so the count
is exact across a crash.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Completion, Task, Verdict
from evo_core.trainer.evaluation import batch_method, grade, grade_many

PURPOSES = ("audit", "regrade", "train", "validation", "test")
SCOPES = ("main", "branch")
METRIC_PREFIX = "oracle_labels"  # a step's metrics: oracle_labels.<scope>.<purpose>
CAPPED = ("audit", "regrade", "validation")  # what [harness.oracle] budget caps (both scopes)
BUDGET_PREFIX = "oracle_budget"  # a step's metrics: oracle_budget.left, oracle_budget.refused.<purpose>


class OracleBudgetExceeded(RuntimeError):
    """A capped draw the budget cannot pay reached ``OracleClient.grade``: its caller should
    have asked ``affordable``/``can_pay`` first."""


def metric_key(scope: str, purpose: str) -> str:
    return f"{METRIC_PREFIX}.{scope}.{purpose}"


@attrs.define
class LabelCounts:
    """Labels drawn so far, per (scope, purpose), and how many of them a log already holds."""

    drawn: dict[str, int] = attrs.Factory(dict)  # metric_key -> labels
    logged: dict[str, int] = attrs.Factory(dict)  # what ``take_unlogged`` has handed out
    limit: Optional[int] = None  # capped labels the run may draw in all (None: no cap)
    # capped labels spent outside this process's draws (the log's before a resume; a follower: the leader's)
    spent_before: int = 0
    refused: dict[str, int] = attrs.Factory(dict)  # purpose -> capped labels refused since the last take

    def resumed(self, totals: Mapping[str, int]) -> None:
        """A resumed run: the capped labels its log holds (``label_totals``) are spent."""
        self.spent_before = sum(int(n) for k, n in totals.items() if k.split(".")[-1] in CAPPED)

    def spent(self) -> int:
        """Capped labels the run has drawn, the log's before a resume included."""
        return self.spent_before + sum(n for k, n in self.drawn.items() if k.split(".")[2] in CAPPED)

    def sync(self, spent: int) -> None:
        """Spend exactly ``spent`` capped labels so far: a follower rank, which never evaluates,
        takes the leader's count before each step."""
        self.spent_before += int(spent) - self.spent()

    def left(self) -> Optional[int]:
        return None if self.limit is None else max(0, self.limit - self.spent())

    def affordable(self, purpose: str, n: int) -> int:
        """How many of ``n`` labels of ``purpose`` the budget pays (all, for an uncapped
        purpose); the rest are counted as refused."""
        left = self.left()
        if purpose not in CAPPED or left is None or n <= left:
            return n
        self.refused[purpose] = self.refused.get(purpose, 0) + n - left
        return left

    def can_pay(self, purpose: str, n: int) -> bool:
        """Whether the budget pays all ``n`` labels (an evaluation is paid whole or not at
        all); a refusal counts all ``n`` as refused."""
        left = self.left()
        if purpose not in CAPPED or left is None or n <= left:
            return True
        self.refused[purpose] = self.refused.get(purpose, 0) + n
        return False

    def take_budget(self) -> dict[str, float]:
        """The budget's step metrics: labels left (when capped) and refused since the last call."""
        out: dict[str, float] = {}
        if self.limit is not None:
            out[f"{BUDGET_PREFIX}.left"] = float(self.left() or 0)
        for purpose in CAPPED:
            if self.refused.get(purpose):
                out[f"{BUDGET_PREFIX}.refused.{purpose}"] = float(self.refused[purpose])
        self.refused = {}
        return out

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
        self._check(purpose, len(pairs))
        verdicts = grade_many(self.domain.oracle, self._batch, self.domain, pairs)
        self.counts.add(self.scope, purpose, len(pairs))
        return verdicts

    def grade_one(self, purpose: str, task: Task, completion: Completion) -> Verdict:
        """One pair through ``oracle`` itself (not the batch method): a re-grade."""
        self._check(purpose, 1)
        verdict = grade(self.domain.oracle, self.domain, task, completion)
        self.counts.add(self.scope, purpose, 1)
        return verdict

    def _check(self, purpose: str, n: int) -> None:
        left = self.counts.left()
        if purpose in CAPPED and left is not None and n > left:
            raise OracleBudgetExceeded(f"{n} {purpose} label(s) asked of the strict oracle with {left} left of the "
                                       f"run's budget of {self.counts.limit} (ask affordable/can_pay first)")

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


def budget_labels(share: float, *, prompts_per_step: int, group_size: int, steps: int) -> int:
    """``[harness.oracle] budget`` in labels: a share of the run's nominal training rollouts
    (prompts per step x group size x steps)."""
    return int(math.floor(share * prompts_per_step * group_size * steps + 1e-9))


def training_rollouts(config: Mapping[str, Any]) -> int:
    """A run's nominal training rollouts, from its resolved config (``RunStarted.config``)."""
    rl, run = config.get("rl") or {}, config.get("run") or {}
    return int(rl.get("prompts_per_step") or 0) * int(rl.get("group_size") or 0) * int(run.get("steps") or 0)


def decision_purposes(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The purposes whose labels a run's decisions read, by its arm's config: an evolving
    harness reads the audit, re-grades and validation (main line and A/B branches); a fixed
    one acts on nothing, except that a policy gate that trusts validation (early stopping,
    the reference) reads validation. ``train`` labels (the reference's reward) are the reward
    itself and are reported apart."""
    harness = config.get("harness") or {}
    if harness.get("mode") == "evolving":
        return CAPPED
    policy = (harness.get("gates") or {}).get("policy") or {}
    if policy.get("enabled", True) is not False and policy.get("trust") in ("validation", "strict"):
        return ("validation",)
    return ()


def label_summary(totals: Mapping[str, int], config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's oracle labels for a report: per purpose (both scopes), the A/B branches' share,
    the decision-relevant total and its share of the nominal training rollouts, the early
    stop's validation labels (the main line's: what picking the best validation checkpoint
    reads), and the budget the run ran under."""
    per = {p: sum(int(n) for k, n in totals.items() if k.split(".")[-1] == p) for p in PURPOSES}
    branch = sum(int(n) for k, n in totals.items() if k.startswith("branch.") and k.split(".")[-1] != "test")
    decision = sum(per[p] for p in decision_purposes(config))
    rollouts = training_rollouts(config)
    share = ((config.get("harness") or {}).get("oracle") or {}).get("budget")
    out: dict[str, Any] = {
        "by_purpose": per, "backtest_branches": branch, "decision_relevant": decision,
        "decision_purposes": list(decision_purposes(config)), "training_rollouts": rollouts,
        "decision_share": decision / rollouts if rollouts else None,
        "early_stop_validation": int(totals.get("main.validation", 0)),
        "early_stop_share": int(totals.get("main.validation", 0)) / rollouts if rollouts else None,
        "test_report_only": per["test"], "budget_share": share,
    }
    return out
