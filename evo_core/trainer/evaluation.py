"""Evaluation of a policy on a split with the strict oracle, and the generic outcome
figures every report needs (nothing domain-specific): strict accuracy (sampled and greedy),
the training verifier's reward, the share it pays, and the hack rate — the share of
sampled responses the training verifier pays and the oracle rejects (computed by the
oracle, never by the harness)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from evo_core.api import Completion, Task, Verdict
from evo_core.trainer.protocols import EvalResult, Sample, SamplingParams, VerifierFailed  # noqa: F401


def grade(fn: Any, domain: Any, task: Task, comp: Completion) -> Verdict:
    """Call a domain's verifier or oracle; a raise or a non-Verdict stops the run, clearly."""
    name = getattr(domain, "name", "?")
    try:
        v = fn(task, comp)
    except Exception as exc:
        raise VerifierFailed(f"domain {name!r} {getattr(fn, '__name__', 'verifier')} raised on task "
                             f"{task.task_id!r}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(v, Verdict):
        raise VerifierFailed(f"domain {name!r} returned {type(v).__name__}, not a Verdict")
    return v


def grade_many(fn: Any, batch_fn: Any, domain: Any, pairs: Sequence[tuple[Task, Completion]]) -> list[Verdict]:
    """Verdicts for many (task, completion) pairs: through the domain's batch method when it
    has one (``verify_batch`` / ``oracle_batch``: one verdict per pair, in order, as ``fn``
    would give), else ``fn`` pair by pair. A raise or a wrong answer stops the run, clearly."""
    if batch_fn is None or not pairs:
        return [grade(fn, domain, t, c) for t, c in pairs]
    name = getattr(domain, "name", "?")
    try:
        out = list(batch_fn(list(pairs)))
    except Exception as exc:
        raise VerifierFailed(f"domain {name!r} {getattr(batch_fn, '__name__', 'batch verifier')} raised on "
                             f"{len(pairs)} completions: {type(exc).__name__}: {exc}") from exc
    if len(out) != len(pairs) or not all(isinstance(v, Verdict) for v in out):
        raise VerifierFailed(f"domain {name!r} {getattr(batch_fn, '__name__', 'batch verifier')} returned "
                             f"{len(out)} items for {len(pairs)} completions, or something that is not a Verdict")
    return out


def batch_method(domain: Any, fn_name: str) -> Any:
    """The domain's optional batch counterpart of ``verify`` or ``oracle``, or None."""
    fn = getattr(domain, f"{fn_name}_batch", None)
    return fn if callable(fn) else None


def _mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def score_groups(domain: Any, tasks: Sequence[Task], groups: Sequence[Sequence[Sample]],
                 strict: bool = True, completions: Optional[Sequence[Sequence[Completion]]] = None, *,
                 oracle: Any, purpose: str = "validation") -> tuple[dict[str, Optional[float]], dict[str, float]]:
    """(metrics, per-item score) of sampled completions, graded by oracle and verifier
    (episodes bring their final completions; lengths count the generated tokens). ``oracle``
    is the session's ``OracleClient``: each pair is one label of ``purpose``."""
    s_all, v_all, paid, hacked, lens = [], [], [], [], []
    per_item: dict[str, float] = {}
    pairs = [(t, Completion(text=smp.text, truncated=smp.truncated, n_tokens=len(smp.token_ids))
              if completions is None else completions[gi][j])
             for gi, (t, group) in enumerate(zip(tasks, groups)) for j, smp in enumerate(group)]
    strict_verdicts = iter(oracle.grade(purpose, pairs))
    verify = iter(grade_many(domain.verify, batch_method(domain, "verify"), domain, pairs))
    for t, group in zip(tasks, groups):
        s_item, v_item = [], []
        for smp in group:
            sv, vv = next(strict_verdicts), next(verify)
            ok = bool(sv.correct)
            reward = float(vv.reward) if vv.reward is not None else 0.0
            s_item.append(1.0 if ok else 0.0)
            v_item.append(reward)
            paid.append(1.0 if reward > 0 else 0.0)
            hacked.append(1.0 if reward > 0 and not ok else 0.0)
            lens.append(float(smp.n_generated))
        s_all += s_item
        v_all += v_item
        per_item[t.task_id] = sum(s_item if strict else v_item) / len(group)
    metrics = {"strict_accuracy": _mean(s_all), "train_reward": _mean(v_all), "paid_rate": _mean(paid),
               "hack_rate": _mean(hacked), "length_mean": _mean(lens)}
    return metrics, per_item


def eval_labels(n_items: int, eval_cfg: Any) -> int:
    """The oracle labels one evaluation of ``n_items`` draws: its samples per item, plus the
    greedy completion."""
    return n_items * (int(eval_cfg.samples) + (1 if eval_cfg.greedy else 0))


def evaluate_policy(policy: Any, domain: Any, tasks: Sequence[Task], eval_cfg: Any, rl: Any, *, seed: int,
                    oracle: Any, strict: bool = True, split: str = "validation") -> EvalResult:
    """``eval_cfg.samples`` sampled completions per item (item score = fraction correct under
    the strict oracle, or the training verifier when ``strict`` is False) and, optionally, the
    greedy completion. Seeded, so it never touches the training RNG. The oracle's labels
    count as ``test`` on the test split, else as ``validation``."""
    import torch

    if not tasks:
        return EvalResult(item_scores={}, metrics={}, split=split)
    max_new = eval_cfg.max_new_tokens or rl.max_new_tokens
    # the stop strings are the reply format (an episode's tool call ends at its newline), not a
    # sampling choice: without them an evaluated reply runs on past its call and never parses
    stop = tuple(getattr(rl, "stop", ()) or ())
    purpose = "test" if split == "test" else "validation"
    prompts = [t.prompt for t in tasks]
    metrics: dict[str, Optional[float]] = {}
    item_scores: dict[str, float] = {}
    episodes = getattr(rl, "rollout", "single") == "episode"

    def sample(params: SamplingParams, generator: Any = None) -> tuple[Any, Any]:
        if not episodes:
            return policy.sample(prompts, params, generator=generator), None
        from evo_core.trainer.engine import InProcessEngine
        from evo_core.trainer.episodes import rollout_episodes

        groups, comps, _ = rollout_episodes(InProcessEngine(policy), domain, tasks, params,
                                            encode=policy.tokenizer.encode, decode=policy.tokenizer.decode,
                                            generator=generator, max_turns=int(getattr(rl, "episode_max_turns", 0) or 0))
        return groups, comps

    if eval_cfg.samples > 0:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        groups, comps = sample(SamplingParams(n=eval_cfg.samples, temperature=eval_cfg.temperature,
                                              max_new_tokens=max_new, stop=stop), gen)
        sampled, item_scores = score_groups(domain, tasks, groups, strict, comps, oracle=oracle, purpose=purpose)
        metrics.update(sampled)
    if eval_cfg.greedy:
        groups, comps = sample(SamplingParams(n=1, temperature=0.0, max_new_tokens=max_new, stop=stop))
        greedy, greedy_items = score_groups(domain, tasks, groups, strict, comps, oracle=oracle, purpose=purpose)
        metrics.update({f"{k}_greedy": v for k, v in greedy.items()})
        if not item_scores:
            item_scores = greedy_items
            metrics["strict_accuracy"] = metrics["strict_accuracy_greedy"]
    metrics["samples_per_item"] = float(eval_cfg.samples)
    return EvalResult(item_scores=item_scores, metrics=metrics, split=split)
