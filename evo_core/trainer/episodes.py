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


def episode_sample(calls: Sequence[Sample], encode: Callable[[str], list[int]], *, truncated: bool = False) -> Sample:
    """One sequence for the whole episode: ``prompt_ids`` = the first call's prompt tokens;
    ``token_ids`` = reply 1, the environment's text up to the next reply, reply 2, …;
    ``loss_mask`` = 1 on the replies' tokens, 0 on the environment's; ``logprobs`` = the
    sampler's on the replies, 0 elsewhere. ``encode`` tokenizes text without a BOS."""
    if not calls:
        return Sample(prompt="", text="", truncated=truncated, finish_reason="length" if truncated else "stop")
    first = calls[0]
    ids: list[int] = list(first.token_ids)
    mask: list[int] = [1] * len(ids)
    lps: list[float] = list(first.logprobs) + [0.0] * (len(ids) - len(first.logprobs))
    seen = first.prompt + first.text
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
        seen = c.prompt + c.text
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
    groups: list[list[Sample]] = []
    comps: list[list[Completion]] = []
    stats: list[list[dict[str, Any]]] = []
    for task in tasks:
        g_s, g_c, g_st = [], [], []
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
            g_s.append(sample)
            g_c.append(comp)
            g_st.append(st)
        groups.append(g_s)
        comps.append(g_c)
        stats.append(g_st)
    return groups, comps, stats


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
