"""The multi-turn driver with scripted policies, through the real sandbox."""

import json

import pytest

from evo_core.api import TaskSource
from evo_swe.domain import SWEDomain
from evo_swe.episode import Budget


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class Scripted:
    """A policy that replays fixed replies and records what it was shown."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    def __call__(self, messages):
        self.seen.append([dict(m) for m in messages])
        return self.replies.pop(0) if self.replies else call("submit")


@pytest.fixture(scope="module")
def domain(grader):
    d = SWEDomain(budget=Budget(max_steps=8, bash_timeout=20))
    d._grader = grader
    return d


@pytest.fixture
def task(domain, median_task):
    return domain.to_task(median_task)


def test_scripted_fix_resolves(domain, task):
    policy = Scripted([
        "Let me look at the code.\n" + call("str_replace_editor", command="view", path="/repo/minilib/stats.py"),
        call("str_replace_editor", command="str_replace", path="/repo/minilib/stats.py",
             old_str="(s[mid - 1] + s[mid]) // 2", new_str="(s[mid - 1] + s[mid]) / 2"),
        call("bash", command="python -m pytest -q tests/test_stats.py 2>&1 | tail -3"),
        call("submit"),
    ])
    res = domain.run_episode(task, policy)
    assert res.submitted and res.stop_reason == "submit" and not res.completion.truncated
    turns = [t for t in res.completion.turns if t["role"] == "tool"]
    assert "def median" in turns[0]["output"]
    assert "passed" in turns[2]["output"] and turns[2]["exit_code"] == 0
    assert "test_hidden" not in json.dumps(policy.seen)  # hidden tests never shown
    assert res.stats["tool_call_errors"] == 0
    assert "minilib/stats.py" in res.completion.workspace_diff
    v = domain.verify(task, res.completion)
    o = domain.oracle(task, res.completion)
    assert v.reward == 1.0 and o.reward == 1.0 and o.correct
    assert set(v.signals["outcomes"]["f2p"]) == set(task.gold["FAIL_TO_PASS"]) and not v.signals["outcomes"]["p2p"]
    assert len(o.signals["outcomes"]["p2p"]) == 4
    assert o.signals["files_touched"] == ["minilib/stats.py"] and o.signals["test_files_modified"] == 0


def test_bash_edits_persist_and_history_is_one_commit(domain, task):
    policy = Scripted([
        call("bash", command="git log --all --format=%s | wc -l; git log --all --format=%s"),
        call("bash", command="sed -i 's|s\\[mid\\]) // 2|s[mid]) / 2|' minilib/stats.py && echo done"),
        call("bash", command="grep -n 's\\[mid\\]) / 2' minilib/stats.py"),
        call("submit"),
    ])
    res = domain.run_episode(task, policy)
    tools = [t for t in res.completion.turns if t["role"] == "tool"]
    assert tools[0]["output"].split() == ["1", "base"]  # one commit; the source repo's history is not there
    assert tools[0]["git_history_access"] and res.stats["git_history_access"] == 1
    assert "done" in tools[1]["output"] and tools[2]["exit_code"] == 0
    assert domain.oracle(task, res.completion).reward == 1.0


def test_budget_exhaustion_truncates_and_errors_are_counted(domain, task):
    policy = Scripted([
        "I think the answer is to fix median.",  # no tool call
        call("frobnicate"),  # unknown tool
        call("str_replace_editor", command="view", path="/etc/passwd"),  # escape attempt
        call("bash", command="echo pwned > /etc/evil; sleep 60", timeout=2),  # outside write + timeout
    ] + [call("bash", command="true")] * 10)
    res = domain.run_episode(task, policy, budget=Budget(max_steps=5, bash_timeout=2))
    assert res.stop_reason == "max_steps" and res.completion.truncated and not res.submitted
    s = res.stats
    assert s["tool_call_errors"] == 3 and s["bash_timeouts"] == 1 and s["outside_write_attempts"] == 2
    assert "timed out" in [t for t in res.completion.turns if t["role"] == "tool"][3]["output"]
    v = domain.verify(task, res.completion)
    assert v.reward == 0.0 and v.signals["truncated"] and v.signals["tool_call_errors"] == 3
    # The policy saw a helpful message after its malformed reply.
    assert "no tool call found" in policy.seen[1][-1]["content"]


def test_token_budget_and_policy_protocol_adapter(domain, task):
    from evo_core.trainer.protocols import Sample

    class TinyPolicy:
        name = "tiny"

        def sample(self, prompts, params):
            return [[Sample(prompt=p, text=call("bash", command="ls"), token_ids=tuple(range(300)))] for p in prompts]

        def logprobs(self, *a):
            raise NotImplementedError

    res = domain.run_episode(task, TinyPolicy(), budget=Budget(max_steps=10, max_tokens=1000))
    assert res.stop_reason == "max_tokens" and res.completion.n_tokens == 1200 and res.completion.truncated


def test_load_tasks_with_splits(domain, median_row, tmp_path):
    rows = [dict(median_row, instance_id=f"t{i}", split=s) for i, s in enumerate(["train", "train", "heldout"])]
    p = tmp_path / "tasks.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    assert [t.task_id for t in domain.load_tasks(TaskSource(path=str(p), split="train"))] == ["t0", "t1"]
    assert [t.task_id for t in domain.load_tasks(TaskSource(path=str(p), split="heldout"))] == ["t2"]
    for r in rows:
        r.pop("split")
    p.write_text("\n".join(json.dumps(dict(r, instance_id=f"x{i}")) for i, r in enumerate(rows * 10)))
    fr = {"train": 0.6, "validation": 0.2, "heldout": 0.2}
    parts = {s: {t.task_id for t in domain.load_tasks(TaskSource(path=str(p), split=s, options={"split_fractions": fr}))} for s in fr}
    assert sum(map(len, parts.values())) == 30 and not (parts["train"] & parts["heldout"])
    t = domain.load_tasks(TaskSource(path=str(p), split="train", limit=2))
    assert len(t) <= 2 and t[0].domain == "swe" and "test_patch" in t[0].gold


def test_time_budget_with_a_fake_clock(grader, median_task):
    from evo_swe.episode import run_episode
    from evo_swe.workspace import Workspace

    ticks = iter(range(0, 10_000, 400))
    env, _ = grader.env(median_task)
    with Workspace.create(grader.pristine(median_task), env, grader.executor) as ws:
        res = run_episode(ws, "fix it", Scripted([call("str_replace_editor", command="view", path="/repo")] * 5),
                          budget=Budget(max_seconds=1000), clock=lambda: next(ticks))
    assert res.stop_reason == "max_seconds" and res.completion.truncated and res.stats["n_steps"] == 2


def test_infra_failure_gives_no_verdict(swe_root, median_task):
    from evo_core.api import Completion
    from evo_swe.executor import TreeExecutor
    from evo_swe.grading import Grader

    class DeadSandbox:
        name = "dead"

        def run(self, request):
            raise ConnectionError("worker died")

        def close(self):
            pass

    d = SWEDomain()
    d._grader = Grader(cache_dir=swe_root / "cache", executor=TreeExecutor(DeadSandbox()))
    t = d.to_task(median_task)
    for v in (d.verify(t, Completion(text="", workspace_diff=median_task.patch)), d.oracle(t, Completion(text="", workspace_diff=median_task.patch))):
        assert v.reward is None and v.correct is None and "worker died" in v.infra_error


def test_single_turn_diff_in_text(domain, task, median_task):
    from evo_core.api import Completion

    v = domain.oracle(task, Completion(text=f"Here is the fix:\n```diff\n{median_task.patch}```\n"))
    assert v.reward == 1.0 and v.signals["patch_source"] == "text"
    v = domain.verify(task, Completion(text="I could not find the bug."))
    assert v.reward == 0.0 and v.signals["patch_source"] == "none"


def test_the_trainers_agent_drives_a_sandboxed_episode(domain, task):
    """What ``[rl] rollout = "episode"`` does with this domain: the core's agent (rendering,
    one sample per call through a rollout engine) runs real sandboxed tool calls, ``max_turns``
    caps the episode, and the conversation lays out as one sequence with a loss mask."""
    from evo_core.trainer.episodes import PolicyAgent, episode_sample
    from evo_core.trainer.protocols import Sample, SamplingParams
    from evo_core.trainer.tokenizer import CharTokenizer

    tok = CharTokenizer()
    replies = [call("bash", command="grep -n 'def median' minilib/stats.py"), call("bash", command="true"),
               call("submit")]

    class Engine:
        def generate(self, prompts, params, *, generator=None):
            r = replies.pop(0)
            return [[Sample(prompt=prompts[0], text=r, prompt_ids=tuple(tok.encode(prompts[0], add_bos=True)),
                            token_ids=tuple(tok.encode(r)))]]

    agent = PolicyAgent(Engine(), SamplingParams(max_new_tokens=64))
    res = domain.run_episode(task, agent, max_turns=2)
    assert res.stop_reason == "max_steps" and res.stats["n_steps"] == 2 and res.stats["n_tool_calls"] == 2
    tools = [t for t in res.completion.turns if t["role"] == "tool"]
    assert "def median" in tools[0]["output"] and tools[0]["exit_code"] == 0  # ran in the sandbox
    s = episode_sample(agent.calls, tok.encode, truncated=res.completion.truncated)
    first, second = (len(tok.encode(c.text)) for c in agent.calls)
    assert s.n_generated == first + second and s.loss_mask[:first] == (1,) * first
    assert s.loss_mask[-second:] == (1,) * second and 0 in s.loss_mask
    assert list(s.prompt_ids) + list(s.token_ids) == tok.encode(agent.calls[1].prompt + agent.calls[1].text, add_bos=True)
