"""Episode rollouts (``[rl] rollout = "episode"``) with a scripted fake domain: the
conversation as one sequence, the loss mask (only the policy's tokens), a finite loss whose
gradient never reaches the environment's tokens, one RL step end to end, and the config
error for a domain without ``run_episode``."""

from __future__ import annotations

import hashlib
import math
from types import SimpleNamespace

import pytest
import torch

from evo_core.api import Completion, EpisodeDomain, Task, Verdict, supports_episodes
from evo_core.config import ConfigError, load_config
from evo_core.trainer.episodes import EpisodeError, PolicyAgent, episode_sample, generated_mask, render_chat
from evo_core.trainer.grpo import LossSettings, pg_loss
from evo_core.trainer.policy import HFPolicy
from evo_core.trainer.protocols import Sample, SamplingParams
from evo_core.trainer.session import RLSession
from evo_core.trainer.step_events import rollout_events, trajectory_payload
from evo_core.trainer.tiny import TinyModelConfig

from .testlib import TINY_MODEL


class ScriptedEpisodes:
    """A fake episode domain: ``turns`` policy replies, each answered by an ``echo`` tool
    (the environment's text: "obs K: <length of the reply>"). Reward: a hash bit of the replies."""

    name = "scripted"
    version = "1"

    def __init__(self, turns: int = 2) -> None:
        self.turns = turns
        self.episodes = 0

    def load_tasks(self, source):
        return [Task(task_id=f"t{i}", prompt=f"task {i}") for i in range(4)]

    def run_episode(self, task, policy, *, max_turns=None):
        self.episodes += 1
        msgs = [{"role": "system", "content": "tools: echo"}, {"role": "user", "content": task.prompt}]
        turns, n_tok, text = [], 0, ""
        for k in range(max_turns or self.turns):
            text, n = policy(msgs)
            n_tok += n
            msgs.append({"role": "assistant", "content": text})
            turns.append({"role": "assistant", "content": text, "n_tokens": n})
            obs = f"obs {k}: {len(text)}"
            turns.append({"role": "tool", "tool": "echo", "output": obs})
            msgs.append({"role": "user", "content": obs})
        stats = {"n_steps": len(turns) // 2, "n_tool_calls": len(turns) // 2, "stop_reason": "max_steps"}
        return SimpleNamespace(completion=Completion(text=text, turns=tuple(turns), n_tokens=n_tok), stats=stats)

    def _grade(self, task, completion):
        replies = "|".join(t["content"] for t in completion.turns if t["role"] == "assistant")
        bit = int(hashlib.sha256(replies.encode()).hexdigest(), 16) % 2
        return Verdict(reward=float(bit), correct=bool(bit), signals={"n_steps": -1})  # the verdict's own wins

    verify = oracle = _grade


class ScriptedEngine:
    """Replies from a script, tokenized by the policy's tokenizer (a character tokenizer: the
    layout can be checked against the whole conversation's encoding)."""

    def __init__(self, tok, replies):
        self.tok, self.replies, self.prompts = tok, list(replies), []

    def generate(self, prompts, params, *, generator=None):
        (p,) = prompts
        self.prompts.append(p)
        r = self.replies.pop(0)
        ids = tuple(self.tok.encode(r))
        return [[Sample(prompt=p, text=r, prompt_ids=tuple(self.tok.encode(p, add_bos=True)), token_ids=ids,
                        logprobs=tuple(-0.5 for _ in ids))]]


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return HFPolicy.tiny(TinyModelConfig(**TINY_MODEL), seed=0)


def _two_turn(policy):
    eng = ScriptedEngine(policy.tokenizer, ["12+3", "= 15"])
    agent = PolicyAgent(eng, SamplingParams(n=4, max_new_tokens=8))
    res = ScriptedEpisodes(turns=2).run_episode(Task(task_id="x", prompt="task 7"), agent)
    return eng, agent, res


def test_the_capability_is_optional_and_typed():
    assert supports_episodes(ScriptedEpisodes()) and isinstance(ScriptedEpisodes(), EpisodeDomain)
    from evo_arithmetic.domain import ArithmeticDomain

    assert not supports_episodes(ArithmeticDomain())


def test_a_two_turn_episode_is_one_sequence_with_the_expected_mask(policy):
    tok = policy.tokenizer
    eng, agent, res = _two_turn(policy)
    assert agent.params.n == 1 and len(agent.calls) == 2
    s = episode_sample(agent.calls, tok.encode, truncated=False)
    r1, r2 = tok.encode("12+3"), tok.encode("= 15")
    between = "\n<|user|>\nobs 0: 4\n<|assistant|>\n"  # the tool's answer and the next turn's header
    obs = tok.encode(between)
    assert eng.prompts[1] == eng.prompts[0] + "12+3" + between
    assert list(s.token_ids) == r1 + obs + r2
    assert list(s.loss_mask) == [1] * len(r1) + [0] * len(obs) + [1] * len(r2)
    assert s.n_generated == len(r1) + len(r2)
    # as the policy saw it: the first prompt then the rest is the last prompt plus its reply
    assert list(s.prompt_ids) + list(s.token_ids) == tok.encode(eng.prompts[1] + "= 15", add_bos=True)
    assert s.logprobs == (-0.5,) * len(r1) + (0.0,) * len(obs) + (-0.5,) * len(r2)
    assert s.text == "= 15" and res.completion.turns[0]["content"] == "12+3"


def test_a_domain_that_rewrites_the_reply_is_an_error(policy):
    tok = policy.tokenizer
    a = Sample(prompt=render_chat([{"role": "user", "content": "q"}]), text="abc", token_ids=(1, 2, 3))
    b = Sample(prompt=render_chat([{"role": "user", "content": "q"}, {"role": "assistant", "content": "ABC"}]),
               text="d", token_ids=(4,))
    with pytest.raises(EpisodeError, match="verbatim"):
        episode_sample([a, b], tok.encode)


def test_only_generated_tokens_get_loss_and_gradient(policy):
    tok = policy.tokenizer
    _, agent, _ = _two_turn(policy)
    s = episode_sample(agent.calls, tok.encode)
    logp, mask, _ = policy.score([s.prompt_ids], [s.token_ids])
    logp.retain_grad()
    gen = generated_mask([s], logp.shape[1], mask)
    full = mask * gen
    assert full[0].tolist() == [float(x) for x in s.loss_mask]
    settings = LossSettings(kl_coef=0.1)
    loss, _ = pg_loss(logp, logp.detach(), torch.tensor([1.0]), full, settings, ref_logp=logp.detach() - 0.1,
                      n_seqs=1, n_tokens=float(s.n_generated))
    assert math.isfinite(loss.item())
    policy.model.zero_grad(set_to_none=True)
    loss.backward()
    g = logp.grad[0]
    obs = [i for i, m in enumerate(s.loss_mask) if m == 0]
    gen_pos = [i for i, m in enumerate(s.loss_mask) if m == 1]
    assert obs and all(g[i].item() == 0.0 for i in obs)  # no gradient through the environment's tokens
    assert all(g[i].item() != 0.0 for i in gen_pos)  # every generated token carries the advantage
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.model.parameters())
    # the loss is the token mean over the generated tokens only
    d = -0.1  # k3 estimator of KL: ref - logp
    kl = math.exp(d) - d - 1
    expect = float(((-1.0 + 0.1 * kl) * full[0]).sum() / len(gen_pos))
    assert loss.item() == pytest.approx(expect, rel=1e-5)


def test_single_completions_keep_the_scorer_mask(policy):
    s = Sample(prompt="p", text="ab", prompt_ids=(1, 2), token_ids=(3, 4))
    assert generated_mask([s], 2, torch.ones(1, 2)) is None and s.n_generated == 2


def test_an_rl_step_runs_episodes(tiny_cfg, policy):
    import copy

    cfg = tiny_cfg(rl={"rollout": "episode", "episode_max_turns": 2, "prompts_per_step": 2, "group_size": 3,
                       "max_new_tokens": 3})
    dom = ScriptedEpisodes(turns=5)
    session = RLSession(policy=copy.deepcopy(policy), domain=dom, train_tasks=dom.load_tasks(None),
                        validation_tasks=[], rl=cfg.rl, eval_cfg=cfg.eval, seed=0, total_steps=2, audit_rate=0.5)
    before = {k: v.clone() for k, v in session.policy.state_dict().items()}
    res = session.rl_step(None)
    assert len(res.items) == 6 and res.updated
    for it, s in zip(res.items, res.samples):
        assert len(it.completion.turns) == 4  # episode_max_turns = 2 replies, each answered
        assert s.loss_mask and 0 in s.loss_mask and s.n_generated <= 2 * 3
        assert it.verdict.signals["n_tool_calls"] == 2 and it.verdict.signals["n_steps"] == -1
    assert math.isfinite(res.metrics["loss"]) and res.metrics["length_mean"] <= 6
    assert any(not torch.equal(before[k], v) for k, v in session.policy.state_dict().items())
    payload = trajectory_payload("r", res)
    roll = payload["rollouts"][0]
    assert roll["turns"][1] == {"role": "tool", "tool": "echo", "output": roll["turns"][1]["output"]}
    assert roll["loss_mask"] == list(res.samples[0].loss_mask)
    ev = rollout_events("r", res)
    assert ev[0].length == res.samples[0].n_generated and ev[0].signals["stop_reason"] == "max_steps"


def test_a_raising_episode_stops_the_step_like_a_raising_verifier(tiny_cfg, policy):
    from evo_core.trainer.evaluation import VerifierFailed

    class Broken(ScriptedEpisodes):
        def run_episode(self, task, policy, *, max_turns=None):
            policy([{"role": "user", "content": "x"}])
            raise OSError("sandbox gone")

    cfg = tiny_cfg(rl={"rollout": "episode", "prompts_per_step": 1, "group_size": 2, "max_new_tokens": 2})
    dom = Broken()
    session = RLSession(policy=policy, domain=dom, train_tasks=dom.load_tasks(None), validation_tasks=[],
                        rl=cfg.rl, eval_cfg=cfg.eval, seed=0, total_steps=1)
    with pytest.raises(VerifierFailed, match="'scripted' run_episode failed on task .*OSError: sandbox gone"):
        session.rl_step(None)


def test_evaluation_runs_episodes_too(tiny_cfg, policy):
    cfg = tiny_cfg(rl={"rollout": "episode", "episode_max_turns": 2, "max_new_tokens": 3}, eval={"samples": 2})
    dom = ScriptedEpisodes(turns=5)
    tasks = dom.load_tasks(None)
    session = RLSession(policy=policy, domain=dom, train_tasks=tasks[:2], validation_tasks=tasks[2:], rl=cfg.rl,
                        eval_cfg=cfg.eval, seed=0, total_steps=2)
    res = session.evaluate("validation")
    assert dom.episodes == 2 * (2 + 1)  # 2 tasks x (2 sampled + 1 greedy) episodes
    assert set(res.item_scores) == {"t2", "t3"} and 0 < res.metrics["length_mean"] <= 6
    assert res.metrics["strict_accuracy_greedy"] is not None
    assert session.evaluate("validation").item_scores == res.item_scores  # seeded by the policy version


def test_episodes_on_a_domain_without_run_episode_fail_at_load(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[run]\nname = "e"\nsteps = 2\n[task]\ntrain = "generate://addition?digits=2&validation=20&test=20"\n'
                 '[rl]\nrollout = "episode"\n')
    with pytest.raises(ConfigError) as exc:
        load_config(str(p), [])
    msg = str(exc.value)
    assert "\n" not in msg and "'rl.rollout'" in msg and "'arithmetic' has no run_episode" in msg
    with pytest.raises(ConfigError, match="must be one of 'single', 'episode'"):
        load_config(str(p), ["rl.rollout=episodes"])
