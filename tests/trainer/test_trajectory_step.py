"""One RL step of episodes on a domain with a trajectory classifier: every RolloutCompleted
carries the episode's trajectory features beside its response features, and the domain's
words in them are renamed under the session's signal naming."""

from __future__ import annotations

import copy

import pytest
import torch

from evo_core.api import Completion, RuleClassifier, Task, Verdict
from evo_core.signal_names import opaque_name
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.session import RLSession
from evo_core.trainer.step_events import rollout_events
from evo_core.trainer.tiny import TinyModelConfig

from .testlib import TINY_MODEL


class Edits:
    """Each reply is one call: a reply starting with a digit edits a test file, any other
    edits a source file; the last call submits."""

    name, version = "edits", "1"
    trajectory_classifier = RuleClassifier(tools={"edit": "edit", "submit": "submit"},
                                           paths=(("test_*", "test"),), default_path="source")

    def load_tasks(self, source):
        return [Task(task_id=f"t{i}", prompt=f"task {i}") for i in range(4)]

    def run_episode(self, task, policy, *, max_turns=None):
        msgs = [{"role": "user", "content": task.prompt}]
        turns, text = [], ""
        for k in range(max_turns or 2):
            text, _ = policy(msgs)
            msgs.append({"role": "assistant", "content": text})
            turns.append({"role": "assistant", "content": text})
            path = "test_a.py" if text[:1].isdigit() else "a.py"
            turns.append({"role": "tool", "tool": "edit", "path": path, "output": "ok"})
            msgs.append({"role": "user", "content": "ok"})
        turns.append({"role": "tool", "tool": "submit", "stop_reason": "submit"})
        return Completion(text=text, turns=tuple(turns))

    def verify(self, task, completion):
        return Verdict(reward=1.0, correct=True)

    oracle = verify


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)


@pytest.mark.parametrize("naming", [None, ("hashed", 4)])
def test_rollout_events_carry_trajectory_features(tiny_cfg, policy, naming):
    cfg = tiny_cfg(rl={"rollout": "episode", "episode_max_turns": 2, "prompts_per_step": 2, "group_size": 2,
                       "max_new_tokens": 3})
    dom = Edits()
    session = RLSession(policy=copy.deepcopy(policy), domain=dom, train_tasks=dom.load_tasks(None),
                        validation_tasks=[], rl=cfg.rl, eval_cfg=cfg.eval, seed=0, total_steps=1, audit_rate=0.0)
    if naming:
        session.signal_naming = naming
    res = session.rl_step(None)
    test = "test" if naming is None else opaque_name("test", 4)
    for it, ev in zip(res.items, rollout_events("r", res)):
        f = ev.features
        assert "chars" in f and f["traj_turns"] == 5 and f["traj_calls_edit"] == 2 and f["traj_submitted"] is True
        digits = sum(t["content"][:1].isdigit() for t in it.completion.turns if t["role"] == "assistant")
        assert f[f"traj_edit_share[{test}]"] == digits / 2
        assert not [k for k in f if "[" in k and naming and ("test" in k or "edit]" in k or "source" in k)]


def test_build_session_takes_the_signal_naming_from_the_task_options(tiny_cfg):
    import evo_arithmetic.plugin as arithmetic
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_session

    pm = PluginManager(load_entrypoints=False)
    pm.register(arithmetic, name="evo_arithmetic")
    plain, _ = build_session(tiny_cfg(), pm)
    assert plain.signal_naming == ("plain", 0)
    cfg = tiny_cfg(task={"options": {"signal_names": "hashed", "signal_seed": 9}})
    hashed, _ = build_session(cfg, pm)
    assert hashed.signal_naming == ("hashed", 9)
