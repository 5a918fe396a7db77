"""Generated run logs for tests and benchmarks.

The log has the shape a real run produces: per step a batch of ``RolloutCompleted``
(with a simulated exploit that grows, so diagnostics have something to find), a
``StepCompleted``, a ``PolicyUpdated``; periodic ``EvalCompleted``; and
every ``decision_every`` steps a diagnosis → proposal → backtest → promotion chain
(or a rejection). Deterministic for a given seed.

The defaults give the original log (one ``heldout`` split, ``strict_accuracy`` only); the
keyword options make differing runs for comparisons: other split names (``validation``,
``test``), more eval metrics, a fixed harness (diagnoses only), a policy gate that names
the main line, and interventions that actually curb the exploit.

The exploit is generic and names no real flaw: an exploiting rollout lists several
numbers (signal ``sim_count`` > 1, ``sim_exploited`` true), the lenient training reward
usually pays it and the strict oracle never does. The harness records diagnoses of kind
``sim_exploit`` and proposes the ``sim_exploit_penalty`` reward shaping; these are logged
names only (no plugin provides them: a replay reports ``sim_exploit`` as configured but
not installed, and its recorded diagnoses vanish).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Iterator, Optional, Sequence

from evo_events import (
    BacktestFailed,
    BacktestPassed,
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    PolicyUpdated,
    Promoted,
    Rejected,
    RolloutCompleted,
    RunFinished,
    RunStarted,
    SkillRegistered,
    StepCompleted,
)

DEFAULT_CONFIG = {
    "run": {"name": "synthetic", "steps": 0},
    "harness": {
        "mode": "evolving",
        "diagnostics": {"sim_exploit": {"max_rate": 0.15}, "reward_oracle_gap": {"max_gap": 0.2}},
        "gates": {"policy": {"metric": "heldout_strict_accuracy"}},
    },
}


EVAL_METRICS = ("strict_accuracy", "strict_accuracy_greedy", "hack_rate")


def _rid(rng: random.Random) -> str:
    return "%032x" % rng.getrandbits(128)


def iter_run_batches(
    run_id: str,
    *,
    steps: int,
    rollouts_per_step: int,
    seed: int = 0,
    decision_every: int = 5,
    eval_every: int = 5,
    heldout_n: int = 50,
    trajectories: bool = False,
    blobs=None,
    splits: Sequence[str] = ("heldout",),
    eval_metrics: Sequence[str] = ("strict_accuracy",),
    harness_mode: str = "evolving",
    policy_gate: bool = False,
    curb: float = 0.0,
) -> Iterator[list[Event]]:
    """Yield the run's events one step-batch at a time (what the trainer appends).

    ``splits``: the eval splits logged at each eval step. ``eval_metrics``: any of
    ``strict_accuracy``, ``strict_accuracy_greedy``, ``hack_rate``. ``harness_mode="fixed"``
    logs diagnoses but never proposes. ``policy_gate``: each eval's checkpoint is promoted
    (``Promoted(subject="policy")``) or rejected against the main line. ``curb``: each
    promoted intervention scales the exploit probability by ``1 - curb``.
    """
    unknown = set(eval_metrics) - set(EVAL_METRICS)
    if unknown or harness_mode not in ("fixed", "evolving") or not splits:
        raise ValueError(f"synthetic run: eval_metrics must be among {EVAL_METRICS}, harness_mode fixed|evolving, "
                         f"and splits non-empty (got {sorted(unknown)}, {harness_mode!r}, {list(splits)})")
    rng = random.Random(seed)
    cfg = json.loads(json.dumps(DEFAULT_CONFIG))
    cfg["run"]["steps"] = steps
    cfg["harness"]["mode"] = harness_mode
    cfg_hash = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()
    yield [RunStarted(run_id=run_id, event_id=_rid(rng), config=cfg, config_hash=cfg_hash, seed=seed,
                      harness_mode=harness_mode, code_version="synthetic", started_at="2026-01-01T00:00:00Z")]
    harness_version = 0
    promotions = 0
    main: Optional[float] = None  # the main line's strict accuracy (policy_gate)
    for step in range(1, steps + 1):
        exploit_p = min(0.9, 0.05 + 0.8 * step / max(steps, 1)) * (1.0 - curb) ** promotions
        batch: list[Event] = []
        for i in range(rollouts_per_step):
            exploited = rng.random() < exploit_p
            strict = (not exploited) and rng.random() < 0.6
            reward = 1.0 if (strict or (exploited and rng.random() < 0.8)) else 0.0
            n_numbers = rng.choice((2, 3)) if exploited else 1
            traj = None
            if trajectories and blobs is not None:
                traj = blobs.put(json.dumps({"prompt": f"{i}+{step}=", "response": "x"}).encode(), "application/json")
            batch.append(RolloutCompleted(
                run_id=run_id, event_id=_rid(rng), step=step, task_id=f"t{rng.randrange(5000)}",
                group_id=f"s{step}g{i // 8}", policy_version=step - 1, reward=reward, correct=reward > 0,
                strict_correct=strict if i % 4 == 0 else None, length=3 + n_numbers * 3,
                response_preview=" ".join(str(rng.randrange(200)) for _ in range(n_numbers)),
                trajectory=traj,
                signals={"sim_count": n_numbers, "sim_exploited": exploited, "extraction": "lenient", "entropy": round(rng.uniform(0.2, 1.5), 4)},
            ))
        rewards = [e.reward for e in batch]  # type: ignore[attr-defined]
        mean = sum(rewards) / len(rewards)
        batch.append(StepCompleted(run_id=run_id, event_id=_rid(rng), step=step, policy_version=step,
                                   harness_version=harness_version,
                                   metrics={"reward_mean": mean, "exploit_rate": exploit_p, "loss": rng.uniform(-0.1, 0.1)}))
        digest = hashlib.sha256(f"{run_id}:{step}".encode()).hexdigest()
        batch.append(PolicyUpdated(run_id=run_id, event_id=_rid(rng), step=step, policy_version=step, digest=digest))
        if step % eval_every == 0:
            evals = []
            for k, split in enumerate(splits):
                items = {f"h{j}": float(rng.random() < 0.6 - 0.02 * k - 0.2 * exploit_p) for j in range(heldout_n)}
                metrics = {"strict_accuracy": sum(items.values()) / heldout_n}
                if "strict_accuracy_greedy" in eval_metrics:  # greedy decoding: a little better than sampling
                    metrics["strict_accuracy_greedy"] = min(1.0, metrics["strict_accuracy"] + rng.uniform(0.0, 0.08))
                if "hack_rate" in eval_metrics:  # exploiting answers the lenient verifier pays and the oracle rejects
                    metrics["hack_rate"] = sum(rng.random() < 0.8 * exploit_p for _ in range(heldout_n)) / heldout_n
                evals.append(EvalCompleted(run_id=run_id, event_id=_rid(rng), step=step, policy_version=step, split=split,
                                           n=heldout_n, metrics=metrics, item_scores=items))
            batch += evals
            if policy_gate:
                acc = evals[0].metrics["strict_accuracy"]
                if main is None or acc >= main - 0.02:
                    batch.append(Promoted(run_id=run_id, event_id=_rid(rng), subject="policy", subject_id=str(step), step=step,
                                          gate="policy", harness_version_before=harness_version,
                                          harness_version_after=harness_version, reasons=("strict accuracy held",),
                                          figures={"candidate_strict": acc, "main_strict": main}, caused_by=(evals[0].event_id,)))
                    main = acc
                else:
                    batch.append(Rejected(run_id=run_id, event_id=_rid(rng), subject="policy", subject_id=str(step), step=step,
                                          gate="policy", harness_version=harness_version,
                                          reasons=(f"policy: held-out strict accuracy fell: {acc:.3f} < main {main:.3f}",),
                                          figures={"candidate_strict": acc, "main_strict": main}, caused_by=(evals[0].event_id,)))
        if step % decision_every == 0:
            evidence = tuple(e.event_id for e in batch[:8])
            diag = FailureDiagnosed(run_id=run_id, event_id=_rid(rng), step=step, kind="sim_exploit",
                                    severity="invalid" if exploit_p > 0.3 else "warning", diagnostic="sim_exploit",
                                    diagnostic_version="1", evidence=evidence, caused_by=evidence,
                                    stats={"rate": exploit_p, "threshold": 0.15})
            params = {"penalty": round(0.5 + 0.1 * (step // decision_every), 3)}
            fp = hashlib.sha256(json.dumps(["reward_shaping", "sim_exploit_penalty", params], sort_keys=True).encode()).hexdigest()
            prop = InterventionProposed(run_id=run_id, event_id=_rid(rng), step=step, kind="reward_shaping",
                                        name="sim_exploit_penalty", params=params, targets=("sim_exploit",),
                                        prediction={"diagnosis_rate_falls": "sim_exploit", "guard_metric": "heldout_strict_accuracy"},
                                        rationale="exploiting answers are paid by the lenient verifier", proposer="rules",
                                        fingerprint=fp, caused_by=(diag.event_id,))
            if harness_mode == "fixed":  # a fixed harness diagnoses but never changes itself
                batch.append(diag)
                yield batch
                continue
            passed = (step // decision_every) % 2 == 1
            cls = BacktestPassed if passed else BacktestFailed
            bt = cls(run_id=run_id, event_id=_rid(rng), proposal_id=prop.event_id, step=step, mode="offline",
                     figures={"precision": 0.9 if passed else 0.4, "recall": 0.8}, ci=(0.01, 0.09) if passed else (-0.05, 0.02),
                     n=200, evidence=evidence, caused_by=(prop.event_id,))
            batch += [diag, prop, bt]
            if passed:
                skill_id = f"skill-{prop.event_id[:12]}"
                batch.append(SkillRegistered(run_id=run_id, event_id=_rid(rng), skill_id=skill_id, name="sim_exploit_penalty",
                                             bundle={"intervention": {"kind": "reward_shaping", "name": "sim_exploit_penalty", "params": params},
                                                     "preconditions": {"diagnosis": "sim_exploit"}},
                                             provenance={"proposal": prop.event_id}, source_run=run_id, caused_by=(prop.event_id,)))
                batch.append(Promoted(run_id=run_id, event_id=_rid(rng), subject="intervention", subject_id=prop.event_id,
                                      step=step, gate="statistical", harness_version_before=harness_version,
                                      harness_version_after=harness_version + 1, reasons=("ci excludes zero",),
                                      plugin_versions={"rules": "1", "sim_exploit": "1"}, skill_id=skill_id,
                                      caused_by=(bt.event_id,)))
                harness_version += 1
                promotions += 1
            else:
                batch.append(Rejected(run_id=run_id, event_id=_rid(rng), subject="intervention", subject_id=prop.event_id,
                                      step=step, gate="statistical", harness_version=harness_version,
                                      reasons=("ci includes zero",), fingerprint=fp, caused_by=(bt.event_id,)))
        yield batch
    yield [RunFinished(run_id=run_id, event_id=_rid(rng), status="completed", step=steps)]


def generate_run(store, *, run_id: Optional[str] = None, steps: int = 20, rollouts_per_step: int = 32, seed: int = 0, **kw) -> str:
    """Write a generated run into ``store`` (one append per step batch) and return its id."""
    from evo_core.store import run_stream

    run_id = run_id or f"synthetic-{seed}"
    stream = run_stream(run_id)
    version = store.stream_version(stream)
    for batch in iter_run_batches(run_id, steps=steps, rollouts_per_step=rollouts_per_step, seed=seed,
                                  blobs=store.blobs, **kw):
        store.append(stream, batch, expected_version=version)
        version += len(batch)
    return run_id
