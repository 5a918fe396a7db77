"""Episode rollouts (``[rl] rollout = "episode"``): each rollout of a GRPO group is one
multi-turn episode that the domain runs (``evo_core.api.EpisodeDomain.run_episode``) with the
current policy as its agent.

The agent renders the conversation (:func:`render_chat`), samples one reply through the
session's rollout engine (its generator, temperature and per-turn ``max_new_tokens``) and
records it. Afterwards :func:`episode_sample` lays the whole conversation out as ONE sequence,
as the policy saw it: the first prompt, then each reply's sampled token ids, with the
environment's text between two replies (the tool result and the next turn's header) tokenized
in between. ``Sample.loss_mask`` marks the generated tokens; the update multiplies the scorer's
mask by it (:func:`generated_mask`), so only the policy's own tokens get loss, KL and entropy,
and the episode's advantage applies to every one of them.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from evo_core.api import Completion
from evo_core.trainer.protocols import Sample, SamplingParams


class EpisodeError(RuntimeError):
    """An episode's conversation cannot be laid out as one sequence (a domain changed the
    policy's reply or an earlier turn before the next call)."""


def render_chat(messages: Sequence[Mapping[str, str]]) -> str:
    """The conversation as the policy's prompt: ``<|role|>\\ncontent\\n`` per message, then
    ``<|assistant|>\\n``. Prefix-consistent: appending the reply and a new message to the
    conversation extends the previous prompt plus reply."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


class PolicyAgent:
    """The policy as a domain's agent: ``messages -> (reply text, tokens generated)``. Every
    call samples one reply through ``engine`` and is kept in ``calls`` (in order)."""

    def __init__(self, engine: Any, params: SamplingParams, *, generator: Any = None,
                 render: Callable[[Sequence[Mapping[str, str]]], str] = render_chat) -> None:
        self.engine = engine
        self.params = params if params.n == 1 else _with_n1(params)
        self.generator = generator
        self.render = render
        self.calls: list[Sample] = []

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> tuple[str, int]:
        prompt = self.render(messages)
        s = self.engine.generate([prompt], self.params, generator=self.generator)[0][0]
        self.calls.append(s)
        return s.text, len(s.token_ids)


def _with_n1(params: SamplingParams) -> SamplingParams:
    import attrs

    return attrs.evolve(params, n=1)


def episode_sample(calls: Sequence[Sample], encode: Callable[[str], list[int]], *, truncated: bool = False,
                   decode: Optional[Callable[[Sequence[int]], str]] = None) -> Sample:
    """One sequence for the whole episode: ``prompt_ids`` = the first call's prompt tokens;
    ``token_ids`` = reply 1, the environment's text up to the next reply, reply 2, …;
    ``loss_mask`` = 1 on the replies' tokens, 0 on the environment's; ``logprobs`` = the
    sampler's on the replies, 0 elsewhere. ``encode`` tokenizes text without a BOS.
    ``decode`` (the batched path) gives a reply's text as the next prompt holds it: with its
    stop string, which ``Sample.text`` leaves out but its tokens include."""
    if not calls:
        return Sample(prompt="", text="", truncated=truncated, finish_reason="length" if truncated else "stop")
    first = calls[0]
    ids: list[int] = list(first.token_ids)
    mask: list[int] = [1] * len(ids)
    lps: list[float] = list(first.logprobs) + [0.0] * (len(ids) - len(first.logprobs))
    def said(c: Sample) -> str:
        return decode(c.token_ids) if decode is not None else c.text

    seen = first.prompt + said(first)
    for k, c in enumerate(calls[1:], start=2):
        if not c.prompt.startswith(seen):
            raise EpisodeError(f"turn {k}'s prompt does not extend turn {k - 1}'s prompt and reply: the domain "
                               "must append the policy's reply verbatim and keep earlier turns unchanged")
        between = encode(c.prompt[len(seen):])
        ids += between
        mask += [0] * len(between)
        lps += [0.0] * len(between)
        ids += c.token_ids
        mask += [1] * len(c.token_ids)
        lps += list(c.logprobs) + [0.0] * (len(c.token_ids) - len(c.logprobs))
        seen = c.prompt + said(c)
    last = calls[-1]
    return Sample(prompt=first.prompt, text=last.text, prompt_ids=tuple(first.prompt_ids), token_ids=tuple(ids),
                  logprobs=tuple(lps), truncated=truncated, finish_reason=last.finish_reason, loss_mask=tuple(mask))


def outcome_parts(result: Any) -> tuple[Completion, dict[str, Any]]:
    """(final completion, episode stats) of what ``run_episode`` returned."""
    if isinstance(result, Completion):
        return result, {}
    comp = getattr(result, "completion", None)
    if not isinstance(comp, Completion):
        raise EpisodeError(f"run_episode returned {type(result).__name__}, not a Completion or an object with "
                           "a .completion")
    return comp, dict(getattr(result, "stats", None) or {})


def run_episode_groups(engine: Any, domain: Any, tasks: Sequence[Any], params: SamplingParams, *,
                       encode: Callable[[str], list[int]], generator: Any = None, max_turns: int = 0
                       ) -> tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]:
    """``params.n`` episodes per task, one after another, each with a fresh :class:`PolicyAgent`
    over ``engine``: per task, the conversations as samples (laid out with ``encode``), the
    final completions and the episodes' stats."""
    done: list[tuple[Sample, Completion, dict[str, Any]]] = []
    for task in tasks:
        for _ in range(params.n):
            agent = PolicyAgent(engine, params, generator=generator)
            try:
                res = domain.run_episode(task, agent, max_turns=max_turns) if max_turns else domain.run_episode(task, agent)
                comp, st = outcome_parts(res)
                sample = episode_sample(agent.calls, encode, truncated=comp.truncated)
            except Exception as exc:  # like a raising verifier: the run stops with a PluginFailed, clearly
                from evo_core.trainer.protocols import VerifierFailed

                raise VerifierFailed(f"domain {getattr(domain, 'name', '?')!r} run_episode failed on task "
                                     f"{getattr(task, 'task_id', '?')!r}: {type(exc).__name__}: {exc}") from exc
            done.append((sample, comp, st))
    return by_task(done, params.n)


def by_task(episodes: Sequence[tuple[Sample, Completion, dict[str, Any]]], n: int
            ) -> tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]:
    """Episodes laid out task after task, ``n`` each, as the three per-task lists a step reads:
    samples, final completions, episode stats."""
    chunks = [episodes[t:t + n] for t in range(0, len(episodes), n)]
    return ([[e[0] for e in c] for c in chunks], [[e[1] for e in c] for c in chunks],
            [[e[2] for e in c] for c in chunks])


def run_episode_batches(engine: Any, domain: Any, tasks: Sequence[Any], params: SamplingParams, *,
                        encode: Callable[[str], list[int]], decode: Callable[[Sequence[int]], str],
                        generator: Any = None, max_turns: int = 0, max_rounds: int = 1000,
                        ) -> Optional[tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]]:
    """``params.n`` episodes per task, all advancing turn by turn: each turn ONE ``generate``
    over every live episode's prompt, then one ``episode_step`` over their replies (the domain
    runs the turn's tools together). An engine with ``open_turns()`` (the in-process one) keeps
    each episode's KV cache between turns, so a turn encodes only what is new
    (``evo_core/trainer/turn_cache.py``). A reply's text as sampled (``decode`` of its tokens, stop
    string included) and the observation extend the episode's prompt. Returns what
    :func:`run_episode_groups` returns, or None when the domain gives some task no batched
    episode (``episode_reset`` returned None)."""
    n = params.n
    one = _with_n1(params)
    envs: list[Any] = []
    prompts: list[str] = []
    for task in tasks:
        for _ in range(n):
            got = domain.episode_reset(task, max_turns=max_turns or None)
            if got is None:
                return None
            envs.append(got[0])
            prompts.append(got[1])
    calls: list[list[Sample]] = [[] for _ in envs]
    live = list(range(len(envs)))
    rounds = 0
    opener = getattr(engine, "open_turns", None)
    turns = opener() if callable(opener) else None  # keeps each episode's KV cache between turns
    while live:
        rounds += 1
        if rounds > max_rounds:
            raise EpisodeError(f"episodes still running after {max_rounds} turns: the domain's budget never ends them")
        if turns is not None:
            out = turns.generate(live, [prompts[i] for i in live], one, generator=generator)
        else:
            out = engine.generate([prompts[i] for i in live], one, generator=generator)
        samples = [g[0] for g in out]
        said = [decode(s.token_ids) for s in samples]
        steps = domain.episode_step([envs[i] for i in live], said, [len(s.token_ids) for s in samples])
        if len(steps) != len(live):
            raise EpisodeError(f"episode_step returned {len(steps)} results for {len(live)} episodes")
        still = []
        for i, s, text, (obs, done) in zip(live, samples, said, steps):
            calls[i].append(s)
            if not done:
                prompts[i] = s.prompt + text + obs
                still.append(i)
        live = still
    done = []
    for env, turns_taken in zip(envs, calls):
        comp, st = outcome_parts(domain.episode_outcome(env))
        done.append((episode_sample(turns_taken, encode, truncated=comp.truncated, decode=decode), comp, st))
    return by_task(done, n)


def rollout_episodes(engine: Any, domain: Any, tasks: Sequence[Any], params: SamplingParams, *,
                     encode: Callable[[str], list[int]], decode: Optional[Callable[[Sequence[int]], str]] = None,
                     generator: Any = None, max_turns: int = 0
                     ) -> tuple[list[list[Sample]], list[list[Completion]], list[list[dict[str, Any]]]]:
    """The step's (or an evaluation's) episodes: batched when the domain offers
    :class:`evo_core.api.BatchedEpisodeDomain` for these tasks, else one by one."""
    from evo_core.api import supports_batched_episodes

    if decode is not None and supports_batched_episodes(domain):
        try:
            got = run_episode_batches(engine, domain, tasks, params, encode=encode, decode=decode,
                                      generator=generator, max_turns=max_turns)
        except EpisodeError:
            raise
        except Exception as exc:  # like a raising verifier: the run stops with a PluginFailed, clearly
            from evo_core.trainer.protocols import VerifierFailed

            raise VerifierFailed(f"domain {getattr(domain, 'name', '?')!r} batched episodes failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if got is not None:
            return got
    return run_episode_groups(engine, domain, tasks, params, encode=encode, generator=generator, max_turns=max_turns)


def generated_mask(samples: Sequence[Sample], T: int, like: Any) -> Optional[Any]:
    """A [B, T] float mask (1 on generated tokens) for a micro-batch, or None when no sample
    has a ``loss_mask`` (single completions: the scorer's mask is already right)."""
    if not any(s.loss_mask for s in samples):
        return None
    import torch

    out = torch.zeros((len(samples), T), dtype=like.dtype, device=like.device)
    for r, s in enumerate(samples):
        m = s.loss_mask if s.loss_mask else (1,) * len(s.token_ids)
        n = min(len(m), T)
        if n:
            out[r, :n] = torch.tensor(m[:n], dtype=like.dtype)
    return out


def jsonable_turns(turns: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The turns as plain JSON values (the trajectory blob is canonical JSON)."""
    import json

    return json.loads(json.dumps(list(turns), default=str))
