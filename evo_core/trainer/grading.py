"""Grading: the training reward's verdicts for sampled completions, the generic response
features the harness reads (and an episode's trajectory features), and the strict-oracle audit that labels a sample of them.

The training reward is the domain's verifier, or its strict oracle under
``[task] reward = "oracle"`` (the reference arm; those labels count as ``train``).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Completion, RolloutItem, Task, Verdict
from evo_core.harness.features import features_for_group
from evo_core.harness.trajectory import TrajectoryFeaturizer, featurizer_for
from evo_core.trainer.evaluation import grade_many
from evo_core.trainer.protocols import Sample


def training_verdicts(s: Any, pairs: Sequence[tuple[Task, Completion]]) -> list[Verdict]:
    """The training reward's verdicts for ``pairs``, in one call (a batch verifier uses it)."""
    if s.reward == "oracle":
        return s.oracle.grade("train", pairs)
    return grade_many(s.domain.verify, s.verifier_batch, s.domain, pairs)


def trajectory_featurizer(s: Any) -> TrajectoryFeaturizer:
    """The session's trajectory featurizer, built once: the domain's classifier and the run's
    signal naming (``s.signal_naming``, from ``task.options``; plain when unset)."""
    f = getattr(s, "trajectory_features", None)
    if f is None:
        mode, seed = getattr(s, "signal_naming", None) or ("plain", 0)
        f = s.trajectory_features = featurizer_for(s.domain, mode, seed)
    return f


def episode_features(s: Any, comps: Sequence[Completion]) -> list[dict[str, Any]]:
    """Each completion's trajectory features. A domain classifier that raises or answers outside
    its contract stops the run as a raising verifier does (a ``PluginFailed``, one clear line)."""
    from evo_core.trainer.protocols import VerifierFailed

    try:
        traj = trajectory_featurizer(s)
        return [traj.features(c) for c in comps]
    except Exception as exc:
        raise VerifierFailed(f"domain {getattr(s.domain, 'name', '?')!r} trajectory features failed: "
                             f"{type(exc).__name__}: {exc}") from exc


def graded(s: Any, chosen: Sequence[Task], groups: Sequence[Sequence[Sample]], step: int, group_offset: int,
           completions: Optional[Sequence[Sequence[Completion]]] = None,
           episode_stats: Optional[Sequence[Sequence[Mapping[str, Any]]]] = None
           ) -> tuple[list[RolloutItem], list[Sample]]:
    """Features and the training verifier's verdicts for sampled groups (``chosen[i]``
    is group ``group_offset + i`` of the step). Episodes bring their final completions
    (with turns) and stats; the stats join the verdict's signals where it has none."""
    items: list[RolloutItem] = []
    samples: list[Sample] = []
    # every completion of the call is graded at once (a domain with a batch verifier uses it)
    comps = ([[Completion(text=x.text, truncated=x.truncated, n_tokens=len(x.token_ids)) for x in group]
              for group in groups] if completions is None else [list(cs) for cs in completions])
    verdicts = iter(training_verdicts(s, [(task, c) for task, cs in zip(chosen, comps) for c in cs]))
    for gi, (task, group) in enumerate(zip(chosen, groups)):
        gid = f"s{step}g{group_offset + gi}"
        tf = time.perf_counter()
        feats = features_for_group([x.text for x in group], task.prompt, [x.n_generated for x in group],
                                   [x.truncated for x in group])
        if any(c.turns for c in comps[gi]):  # episodes: what each one did, beside its final text
            feats = [{**f, **t} for f, t in zip(feats, episode_features(s, comps[gi]))]
        s.features_s += time.perf_counter() - tf
        for j, (smp, f) in enumerate(zip(group, feats)):
            comp = comps[gi][j]
            verdict = next(verdicts)
            if episode_stats is not None and episode_stats[gi][j]:
                verdict = attrs.evolve(verdict, signals={**episode_stats[gi][j], **verdict.signals})
            rid = hashlib.sha256(f"{s.id_salt}:{step}:{gid}:{j}".encode()).hexdigest()[:32]
            items.append(RolloutItem(rollout_id=rid, group_id=gid, task=task, completion=comp,
                                     verdict=verdict, reward=verdict.reward, mask=verdict.reward is not None,
                                     features=f))
            samples.append(smp)
    return items, samples


def audit(s: Any, items: list[RolloutItem]) -> None:
    """Label a sample of rollouts with the strict oracle (evidence for the harness): the
    share ``audit_rate`` (at least ``audit_min``), drawn from the session's RNG, shrunk to what
    the run's oracle budget still pays (``evo_core.trainer.oracle``)."""
    n = len(items)
    k = min(n, max(int(round(s.audit_rate * n)), s.audit_min if s.audit_rate > 0 else 0))
    chosen = range(n) if k >= n else sorted(s.rng.sample(range(n), k))
    todo = [items[i] for i in chosen if items[i].verdict.reward is not None]
    # the oracle budget pays a prefix of the sample (drawn as always, so the RNG stays in step)
    todo = todo[:s.oracle.counts.affordable("audit", len(todo))]
    strict = s.oracle.grade("audit", [(it.task, it.completion) for it in todo])
    for it, v in zip(todo, strict):
        it.strict = v
