"""Evaluation samples with the run's stop strings: they are the reply format (an episode's tool
call ends at its newline), and a reply sampled without them runs past its call."""

from __future__ import annotations

import types

from evo_core.api import Task, Verdict
from evo_core.trainer.evaluation import evaluate_policy
from evo_core.trainer.oracle import OracleClient
from evo_core.trainer.protocols import Sample


class _Domain:
    name = "stub"

    def verify(self, task, comp):
        return Verdict(correct=comp.text == "ok", reward=1.0 if comp.text == "ok" else 0.0)

    oracle = verify


class _Policy:
    def __init__(self) -> None:
        self.seen = []

    def sample(self, prompts, params, generator=None):
        self.seen.append(params)
        # a policy that honours stop strings: it ends its reply at the first one
        text = "ok\nrambling on" if not params.stop else "ok"
        return [[Sample(prompt=p, text=text, token_ids=(1, 2)) for _ in range(params.n)] for p in prompts]


def _eval(stop):
    policy, domain = _Policy(), _Domain()
    tasks = [Task(task_id=f"t{i}", prompt="p", gold="ok") for i in range(3)]
    eval_cfg = types.SimpleNamespace(samples=2, temperature=1.0, greedy=True, max_new_tokens=0)
    rl = types.SimpleNamespace(max_new_tokens=8, stop=stop, rollout="single")
    res = evaluate_policy(policy, domain, tasks, eval_cfg, rl, seed=0, oracle=OracleClient(domain))
    return policy.seen, res.metrics


def test_evaluation_passes_the_run_stop_strings_to_every_sample() -> None:
    seen, metrics = _eval(["\n"])
    assert [p.stop for p in seen] == [("\n",), ("\n",)]  # sampled, then greedy
    assert metrics["strict_accuracy"] == 1.0 and metrics["strict_accuracy_greedy"] == 1.0


def test_evaluation_without_stop_strings_samples_without_them() -> None:
    seen, metrics = _eval([])
    assert [p.stop for p in seen] == [(), ()]
    assert metrics["strict_accuracy"] == 0.0
