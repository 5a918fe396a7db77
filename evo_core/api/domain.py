"""What a domain provides and what it receives: tasks, completions and verdicts."""

from __future__ import annotations

import random
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence, Union, runtime_checkable

import attrs


@attrs.frozen(kw_only=True)
class Task:
    """One problem. ``prompt`` is what the policy sees; ``gold`` whatever the verifier needs
    (an answer string, a test list, a SWE-bench row); ``meta`` free-form."""

    task_id: str
    prompt: str
    gold: Any = None
    split: str = "train"
    domain: str = ""
    meta: Mapping[str, Any] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class Completion:
    """What the policy produced for a task: final text, plus turns for multi-turn episodes."""

    text: str
    turns: tuple[Mapping[str, Any], ...] = ()
    truncated: bool = False
    n_tokens: int = 0
    workspace_diff: Optional[str] = None  # SWE: the episode's diff


@attrs.frozen(kw_only=True)
class Verdict:
    """A grader's answer. ``reward`` is None exactly when ``infra_error`` is set:
    an infrastructure failure is never scored 0 or 1; training masks it."""

    reward: Optional[float]
    correct: Optional[bool]
    signals: Mapping[str, Any] = attrs.Factory(dict)
    infra_error: Optional[str] = None
    details: Mapping[str, Any] = attrs.Factory(dict)

    @classmethod
    def infra(cls, message: str, **signals: Any) -> "Verdict":
        return cls(reward=None, correct=None, infra_error=message, signals=signals)


@attrs.frozen(kw_only=True)
class TaskSource:
    """Where a domain loads tasks from: a local file path, its format and the split
    (``train``, ``validation`` or ``test``)."""

    path: str
    format: str = "auto"  # "jsonl" | "parquet" | "auto" | a domain-specific name
    split: str = "train"
    limit: Optional[int] = None
    options: Mapping[str, Any] = attrs.Factory(dict)


@runtime_checkable
class Domain(Protocol):
    """A task family: loading, the episode, a cheap training verifier and a strict oracle."""

    name: str
    version: str

    def load_tasks(self, source: TaskSource) -> list[Task]: ...

    def verify(self, task: Task, completion: Completion) -> Verdict:
        """The cheap training verifier (what the reward is computed from)."""
        ...

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        """The strict oracle: held-out evaluation, evidence labels, gates. Never the reward."""
        ...

    # Optional, not part of the runtime check: ``verify_batch(pairs)`` / ``oracle_batch(pairs)``
    # take a list of (task, completion) pairs and return their verdicts in order, exactly what
    # ``verify`` / ``oracle`` would give one by one. The trainer uses them, when a domain has
    # them, to grade a step's rollouts, an audit sample and an evaluation in one call (a
    # domain that runs code can then keep its sandbox busy).


# --- optional capability: multi-turn episodes -------------------------------------------------

#: The agent a domain's ``run_episode`` drives: it takes the conversation so far (a list of
#: ``{"role": ..., "content": ...}`` dicts: system, user, assistant, the environment's turns as
#: "user") and returns ``(reply text, tokens generated)``. The domain must append the reply to
#: the conversation verbatim as an ``assistant`` message before the next call.
EpisodeAgent = Callable[[Sequence[Mapping[str, str]]], "tuple[str, int]"]


@runtime_checkable
class EpisodeOutcome(Protocol):
    """What ``run_episode`` returns: the final completion (with its ``turns``, what ``verify``
    and ``oracle`` grade) and the episode's own summary (``stats``: numbers, flags, short
    lists) that the trainer adds to the rollout's signals where the verdict does not set them."""

    completion: Completion
    stats: Mapping[str, Any]


@runtime_checkable
class EpisodeDomain(Protocol):
    """Optional domain capability: rollouts as multi-turn tool episodes (``[rl] rollout =
    "episode"``). Without it a domain is graded on one sampled completion per rollout."""

    def run_episode(self, task: Task, policy: EpisodeAgent, *,
                    max_turns: Optional[int] = None) -> Union[EpisodeOutcome, Completion]:
        """Run one episode of ``task`` with ``policy`` as the agent, until the agent is done or
        the domain's budget (at most ``max_turns`` agent replies when given) runs out. Returns
        an :class:`EpisodeOutcome` (or just the final ``Completion``, with its ``turns``)."""
        ...


def supports_episodes(domain: Any) -> bool:
    """Whether ``domain`` implements the optional :class:`EpisodeDomain` capability."""
    return callable(getattr(domain, "run_episode", None))


@runtime_checkable
class BatchedEpisodeDomain(Protocol):
    """Optional domain capability: episodes as environments the trainer advances in lock step,
    so that every live episode's next reply comes from ONE batched ``generate`` per turn and
    the domain can run the turn's tools (and their sandbox runs) together.

    The conversation is plain text: the first prompt, then per turn the policy's reply
    verbatim (as sampled, its stop string included) and the domain's observation. The
    observation is appended as is, so each prompt extends the previous prompt plus reply."""

    def episode_reset(self, task: Task, *, max_turns: Optional[int] = None) -> Optional[tuple[Any, str]]:
        """(a fresh episode, its first prompt), or None when this task has no such episode
        (the trainer then runs the call's episodes one by one through ``run_episode``)."""
        ...

    def episode_step(self, envs: Sequence[Any], replies: Sequence[str],
                     n_tokens: Optional[Sequence[int]] = None) -> list[tuple[str, bool]]:
        """Advance each episode by its reply: (observation to append, episode over) each."""
        ...

    def episode_outcome(self, env: Any) -> Union[EpisodeOutcome, Completion]:
        """The finished episode's completion (with its turns) and stats."""
        ...


def supports_batched_episodes(domain: Any) -> bool:
    """Whether ``domain`` implements :class:`BatchedEpisodeDomain`."""
    return all(callable(getattr(domain, m, None)) for m in ("episode_reset", "episode_step", "episode_outcome"))


def generated_splits(count: int, validation: int, test: int, salt: str) -> list[str]:
    """The split of each of ``count`` generated problems: ``validation`` and then ``test`` of
    them drawn by a shuffle seeded by ``salt``, the rest ``train``. Put every parameter that
    shapes the problem space into ``salt``: the splits then depend only on it and the sizes,
    fixed across runs and disjoint by construction."""
    order = list(range(count))
    random.Random(salt).shuffle(order)
    out = ["train"] * count
    for i in order[:validation]:
        out[i] = "validation"
    for i in order[validation:validation + test]:
        out[i] = "test"
    return out
