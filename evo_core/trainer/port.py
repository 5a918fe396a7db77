"""The trainer side of the harness's ``TrainerPort``: forks of the live session for online
backtests, and main-line snapshots persisted in the run's blob store."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from evo_core import faults
from evo_core.harness.ports import BranchEval, Snapshot
from evo_core.trainer.evaluation import eval_labels
from evo_core.trainer.step_events import rollout_events
from evo_events import BlobRef, RolloutCompleted

SNAPSHOT_MEDIA = "application/x-evo-snapshot"  # torch.save of {"model", "optimizer", "policy_version"}


class SessionBranch:
    def __init__(self, session: Any, run_id: str, port: "SessionPort") -> None:
        self.session, self.run_id, self.port = session, run_id, port

    def train(self, k: int, state: Any) -> Sequence[RolloutCompleted]:
        t0 = time.perf_counter()
        out: list[RolloutCompleted] = []
        for i in range(k):
            self.port.tell("train", i, k)
            out += rollout_events(self.run_id, self.session.rl_step(state))
        self.port.branch_s += time.perf_counter() - t0
        faults.point("backtest.arm")
        return out

    def evaluate(self) -> BranchEval:
        t0 = time.perf_counter()
        counts = self.session.oracle.counts
        if counts.left() is not None and not counts.can_pay(
                "validation", eval_labels(len(self.session.splits.get("validation") or ()), self.session.eval_cfg)):
            return BranchEval({}, {})  # the budget ran out mid-A/B: no paired items, no decision
        self.port.tell("eval", 0, 1)
        res = self.session.evaluate("validation")
        self.port.branch_s += time.perf_counter() - t0
        return BranchEval(dict(res.item_scores), dict(res.metrics))


def backtest_labels(session: Any, k_steps: int, replicates: int) -> int:
    """An upper bound on the capped oracle labels an online A/B draws: per branch, ``k_steps``
    steps of audit and re-grades (at the session's rates, on its largest batch: every refill
    round of dynamic sampling) and one validation evaluation; two branches per pair."""
    rl = session.rl
    rounds = int(getattr(rl, "dynamic_sampling_rounds", 0) or 0) if session.dynamic_sampling else 0
    n = int(rl.prompts_per_step) * int(rl.group_size) * (1 + rounds)
    audit = min(n, max(int(round(session.audit_rate * n)), session.audit_min if session.audit_rate > 0 else 0))
    regrade = int(math.ceil(session.regrade_rate * n))
    evaluation = eval_labels(len(session.splits.get("validation") or ()), session.eval_cfg)
    return 2 * replicates * (k_steps * (audit + regrade) + evaluation)


class SessionPort:
    def __init__(self, session: Any, blobs: Any, run_id: str, *, with_optimizer: bool = True) -> None:
        self.session, self.blobs, self.run_id, self.with_optimizer = session, blobs, run_id, with_optimizer
        self.branch_s = 0.0  # forking, training and evaluating backtest branches: training compute, not bookkeeping
        self.on_activity: Optional[Callable[[str, int, int], None]] = None  # a progress display's backtest task

    def tell(self, kind: str, done: int, total: int) -> None:
        if self.on_activity is not None:
            self.on_activity(kind, done, total)

    def fork(self, *, seed: int, start: Optional[Mapping[str, Any]] = None) -> SessionBranch:
        # copying the model and optimizer for a branch is part of training that branch
        t0 = time.perf_counter()
        branch = self.session.fork(seed)
        if start is not None:
            branch.load_weights_bytes(self.blobs.get(BlobRef(**start)))
        self.branch_s += time.perf_counter() - t0
        return SessionBranch(branch, self.run_id, self)

    def unpaid_backtest(self, k_steps: int, replicates: int) -> Optional[str]:
        """Why the oracle budget cannot pay an online A/B of ``replicates`` pairs of ``k_steps``
        each (None: it can, or there is no cap), so that it is not started."""
        left = self.session.oracle.counts.left()
        if left is None:
            return None
        need = backtest_labels(self.session, k_steps, replicates)
        return None if need <= left else (f"the oracle budget cannot pay this A/B: up to {need} labels, "
                                          f"{left} left of {self.session.oracle.counts.limit}")

    def snapshot(self) -> Snapshot:
        ref = self.blobs.put(self.session.weights_bytes(with_optimizer=self.with_optimizer), SNAPSHOT_MEDIA)
        return Snapshot(ref, self.session.policy.digest(), self.session.policy_version)
