"""The run orchestrator: one RL run as an append-only event log.

Per run: ``RunStarted`` (full resolved config, its sha256, seed, harness mode). Per step,
ONE append with the step's ``RolloutCompleted`` batch (trajectories in the blob store,
one blob per step), ``StepCompleted`` (metrics, harness version), ``PolicyUpdated``
(weights digest), any ``PluginFailed`` and, every ``eval_every`` steps, ``EvalCompleted``.
Then the harness sees the committed step (``harness.on_step``) and may emit its own
events; every appended event is folded into the live ``HarnessState`` with the same
``apply`` that replays the log. ``RunFinished`` closes the run.

Resume: before a step's events are appended, a resume checkpoint for that step (model,
optimizer, RNG, data position) is written atomically. ``--resume`` reads the log, finds the
last committed step, loads the checkpoint of exactly that step and goes on; a step whose
events never made it into the log is recomputed, never duplicated.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence

import attrs
import structlog

from evo_core.api import TaskSource
from evo_core.config import ConfigError, RunConfig, config_hash
from evo_core.harness_api import StepContext
from evo_core.plugins import PluginManager, RequiredPluginFailed
from evo_core.state import HarnessState, apply, fold
from evo_core.store import run_stream
from evo_events import (
    BlobRef,
    Emitter,
    EvalCompleted,
    Event,
    PluginFailed,
    PolicyUpdated,
    RolloutCompleted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepCompleted,
)

log = structlog.get_logger("evo.run")
TRAINER = Emitter("evo_trainer", "1")


class RunError(RuntimeError):
    """A run could not start, resume or continue (one-line message)."""


@attrs.define
class RunOutcome:
    run_id: str
    status: str
    steps: int
    summary: dict[str, Any] = attrs.Factory(dict)
    timings: dict[str, float] = attrs.Factory(dict)


class NoopHarness:
    """Used only while the harness engine is not installed: observes nothing, changes nothing."""

    def on_step(self, ctx: StepContext) -> None:
        pass

    def on_run_end(self, ctx: StepContext) -> None:
        pass


def _build_harness(cfg: RunConfig, plugins: Any, run_id: str, store: Any) -> Any:
    try:
        from evo_core.harness import build_harness
    except ModuleNotFoundError as exc:
        if exc.name not in ("evo_core.harness",):
            raise
        log.warning("harness engine not installed; running with a no-op harness")
        return NoopHarness()
    return build_harness(cfg.harness, plugins, run_id=run_id, store=store)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def code_version() -> str:
    try:
        import importlib.metadata as md

        return md.version("evotrainer")
    except Exception:
        return "0+unknown"


# --- building the pieces of a run ----------------------------------------------------------


def build_domain(cfg: RunConfig, plugins: PluginManager) -> tuple[Any, str]:
    from evo_core.plugins import PluginError

    try:
        domain = plugins.domain(cfg.task.domain)
    except PluginError as exc:
        raise RunError(str(exc)) from None
    if hasattr(domain, "configure"):
        try:
            domain = domain.configure(dict(cfg.task.options))
        except ValueError as exc:
            raise RunError(f"task.options: {exc}") from None
    elif cfg.task.options:
        raise RunError(f"domain {cfg.task.domain!r} takes no [task] options (it has no configure())")
    plugin = plugins.plugin_of("evo_register_domains", cfg.task.domain) or cfg.task.domain
    return domain, plugin


def load_tasks(cfg: RunConfig, domain: Any) -> tuple[list[Any], list[Any]]:
    try:
        train = domain.load_tasks(TaskSource(path=cfg.task.train, format=cfg.task.format, split="train"))
        held = domain.load_tasks(TaskSource(path=cfg.task.heldout or cfg.task.train, format=cfg.task.format,
                                            split="heldout", limit=cfg.task.heldout_limit))
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot load tasks: {exc}") from None
    if not train:
        raise RunError(f"task source {cfg.task.train!r} gave no training tasks")
    return train, held


def build_policy(cfg: RunConfig) -> Any:
    from evo_core.trainer.policy import HFPolicy, LoraSettings, PolicyLoadError
    from evo_core.trainer.tiny import TinyModelConfig

    p = cfg.policy
    if p.kind == "tiny":
        return HFPolicy.tiny(TinyModelConfig(**attrs.asdict(p.tiny)), seed=cfg.run.seed, device=cfg.run.device)
    lora = LoraSettings(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout,
                        target_modules=tuple(p.lora.target_modules)) if p.lora.enabled else None
    try:
        return HFPolicy.from_pretrained(p.path, device=cfg.run.device, lora=lora, dtype=p.dtype or None)
    except PolicyLoadError as exc:
        raise RunError(str(exc)) from None


def build_session(cfg: RunConfig, plugins: PluginManager, *, sft: bool = True,
                  on_sft_step: Optional[Callable[[int, float], None]] = None) -> tuple[Any, dict[str, Any]]:
    """Domain, tasks, policy (with the SFT warm start when configured) and the RL session."""
    from evo_core.trainer.session import RLSession
    from evo_core.trainer.sft import warm_start

    if cfg.run.threads:
        import torch

        torch.set_num_threads(cfg.run.threads)
    domain, domain_plugin = build_domain(cfg, plugins)
    train, held = load_tasks(cfg, domain)
    policy = build_policy(cfg)
    sft_info: dict[str, Any] = {}
    if cfg.sft.enabled and sft:
        key_parts = {"policy": attrs.asdict(cfg.policy), "domain": [domain.name, getattr(domain, "version", "")],
                     "task": cfg.task.train}
        sft_info = warm_start(policy, domain, train, cfg.sft, seed=cfg.run.seed, key_parts=key_parts,
                              on_step=on_sft_step)
    audit = dict(cfg.harness.get("audit") or {})
    engine = None
    if cfg.rollout:  # an HTTP (vLLM/SGLang/evo serve) or vLLM engine instead of sampling in process
        from evo_core.trainer.engine_factory import build_rollout_engine

        try:
            engine = build_rollout_engine(cfg.rollout, policy)
        except ValueError as exc:
            raise RunError(str(exc)) from None
    session = RLSession(policy=policy, domain=domain, train_tasks=train, heldout_tasks=held, rl=cfg.rl,
                        eval_cfg=cfg.eval, seed=cfg.run.seed, total_steps=cfg.run.steps, plugins=plugins,
                        audit_rate=float(audit.get("rate", 1.0)), audit_min=int(audit.get("min_per_step", 0)),
                        engine=engine)
    session.domain_plugin = domain_plugin  # type: ignore[attr-defined]
    return session, sft_info


# --- resume checkpoints --------------------------------------------------------------------


class Checkpoints:
    """Resume checkpoints ``<dir>/<run_id>/step-000042.pt``, written to a temp file and
    renamed so a kill never leaves a half-written checkpoint under its final name."""

    def __init__(self, root: str, run_id: str, keep: int = 2) -> None:
        self.dir = os.path.join(root, run_id)
        self.keep = keep
        os.makedirs(self.dir, exist_ok=True)

    def path(self, step: int) -> str:
        return os.path.join(self.dir, f"step-{step:06d}.pt")

    def save(self, step: int, state: dict[str, Any]) -> None:
        import torch

        tmp = self.path(step) + f".tmp-{os.getpid()}"
        torch.save(state, tmp)
        os.replace(tmp, self.path(step))

    def load(self, step: int) -> dict[str, Any]:
        import torch

        path = self.path(step)
        if not os.path.exists(path):
            raise RunError(f"no resume checkpoint for step {step} at {path}; the run cannot resume exactly")
        return torch.load(path, map_location="cpu", weights_only=False)

    def gc(self, committed: int) -> None:
        """Keep the checkpoint of the last committed step and the newest ``keep`` ones."""
        steps = sorted(int(os.path.basename(p)[5:11]) for p in glob.glob(os.path.join(self.dir, "step-*.pt")))
        keep = set(steps[-self.keep:]) | {committed}
        for s in steps:
            if s not in keep and s < committed:
                try:
                    os.remove(self.path(s))
                except FileNotFoundError:
                    pass


# --- the loop ------------------------------------------------------------------------------


class RunLoop:
    """Runs (or resumes) one run of ``cfg`` (already resolved for one harness mode)."""

    def __init__(self, cfg: RunConfig, store: Any, *, plugins: Optional[PluginManager] = None,
                 harness: Any = None, progress: Optional[Any] = None, bookkeeping: bool = True,
                 on_step: Optional[Callable[[int, dict], None]] = None) -> None:
        if len(cfg.run.harnesses) != 1:
            raise RunError("RunLoop runs one harness mode; use run_all() for several")
        self.cfg = cfg
        self.mode = cfg.run.harnesses[0]
        self.store = store
        self.plugins = plugins or PluginManager()
        self.harness = harness
        self.progress = progress
        self.on_step = on_step
        self.state = HarnessState()
        self.version = 0
        self.stream = ""
        self.run_id = ""
        self.timings = {"compute": 0.0, "events": 0.0, "blobs": 0.0, "append": 0.0, "observe": 0.0,
                        "digest": 0.0, "checkpoint": 0.0, "harness": 0.0, "eval": 0.0}
        self.sinks: list[Any] = []
        self.last_eval: dict[str, Any] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evo-blobs")
        self._pending: list[Any] = []

    # -- appending --------------------------------------------------------------------------
    def _append(self, events: Sequence[Event]) -> None:
        if not events:
            return
        t0 = time.perf_counter()
        self.store.append(self.stream, list(events), expected_version=self.version)
        for ev in events:
            self.version += 1
            apply(self.state, ev, self.version)
        t1 = time.perf_counter()
        self.timings["append"] += t1 - t0
        self._observe(events)
        self.timings["observe"] += time.perf_counter() - t1

    def _observe(self, events: Sequence[Event]) -> None:
        failures: list[Event] = []
        for sink in self.sinks:
            try:
                sink.handle(events)
            except Exception as exc:  # a sink never stops training
                failures.append(PluginFailed(run_id=self.run_id, plugin=getattr(sink, "name", "?"), hook="Sink.handle",
                                             error_type=type(exc).__name__, message=str(exc)[:2000],
                                             step=self.state.step, emitted_by=TRAINER))
        start = len(self.plugins.failures)
        self.plugins.call("evo_on_events", run_id=self.run_id, events=list(events))
        failures += self._plugin_failed(self.plugins.failures[start:], self.state.step)
        if failures:
            self.store.append(self.stream, failures, expected_version=self.version)
            for ev in failures:
                self.version += 1
                apply(self.state, ev, self.version)

    def _plugin_failed(self, failures: Sequence[Any], step: int) -> list[Event]:
        return [PluginFailed(run_id=self.run_id, plugin=f.plugin, hook=f.hook, error_type=f.error_type,
                             message=f.message, required=f.required, step=step, emitted_by=TRAINER) for f in failures]

    def emit(self, events: Sequence[Event]) -> None:
        """What the harness calls: append to the run's stream and fold into the live state."""
        self._append(list(events))

    # -- start / resume ---------------------------------------------------------------------
    def start(self, run_id: Optional[str] = None) -> None:
        self.run_id = run_id or f"{self.cfg.run.name}-{self.mode}-{uuid.uuid4().hex[:8]}"
        self.stream = run_stream(self.run_id)
        if self.store.stream_version(self.stream):
            raise RunError(f"run {self.run_id!r} already exists in {self.store.url}; use --resume to continue it")
        self.session, self.sft_info = build_session(self.cfg, self.plugins, on_sft_step=self._sft_progress())
        self.ckpt = Checkpoints(self.cfg.run.checkpoint_dir, self.run_id)
        cfg_dict = self.cfg.to_dict()
        self.config_dict = cfg_dict
        first: list[Event] = [RunStarted(run_id=self.run_id, config=cfg_dict, config_hash=config_hash(cfg_dict),
                                         seed=self.cfg.run.seed, harness_mode=self.mode, code_version=code_version(),
                                         started_at=_now(), emitted_by=TRAINER)]
        first.append(PolicyUpdated(run_id=self.run_id, step=0, policy_version=0, digest=self.session.policy.digest(),
                                   checkpoint=self._weights_blob(), emitted_by=TRAINER))
        synced = self.session.sync_engine()  # the server must sample from the SFT start, not its base model
        if synced:
            first.append(self._synced_event(0, synced))
        evals = []
        if self.cfg.run.eval_at_start:
            from evo_core.trainer.session import VerifierFailed

            try:
                evals = [self._eval_event(0)]
            except VerifierFailed as exc:  # nothing is logged yet: the run never started
                raise RunError(f"cannot start: {exc}") from None
        self.ckpt.save(0, self.session.resume_state())
        self._begin()
        self._append(first + evals)
        self.start_evals = evals
        log.info("run started", run_id=self.run_id, mode=self.mode, config_hash=first[0].config_hash[:12],
                 sft=self.sft_info or None)

    def resume(self, run_id: str) -> None:
        self.run_id = run_id
        self.stream = run_stream(run_id)
        events = list(self.store.events(self.stream))
        if not events:
            raise RunError(f"run {run_id!r} not found in {self.store.url}")
        started = events[0]
        if not isinstance(started, RunStarted):
            raise RunError(f"run {run_id!r}: the log does not begin with RunStarted")
        if started.harness_mode != self.mode:
            raise RunError(f"run {run_id!r} was started with the {started.harness_mode!r} harness, not {self.mode!r}")
        want = config_hash(self.cfg.to_dict())
        if started.config_hash != want:
            raise RunError(f"run {run_id!r}: config differs from the one it started with "
                           f"(hash {started.config_hash[:12]} != {want[:12]}); resume with the same config and --set options")
        finished = [e for e in events if isinstance(e, RunFinished)]
        if finished and finished[-1].status == "completed":
            raise RunError(f"run {run_id!r} already completed at step {finished[-1].step}")
        committed = max((e.step for e in events if isinstance(e, StepCompleted)), default=0)
        self.session, self.sft_info = build_session(self.cfg, self.plugins, sft=False)
        self.ckpt = Checkpoints(self.cfg.run.checkpoint_dir, run_id)
        self.session.load_resume_state(self.ckpt.load(committed))
        self.config_dict = started.config
        self.state = fold(events)
        self.version = len(events)
        self.start_evals = []
        self._begin()
        resumed: list[Event] = [RunResumed(run_id=run_id, from_step=committed, resumed_at=_now(), emitted_by=TRAINER)]
        synced = self.session.sync_engine()
        if synced:
            resumed.append(self._synced_event(committed, synced))
        self._append(resumed)
        log.info("run resumed", run_id=run_id, from_step=committed)

    def _begin(self) -> None:
        try:
            self.sinks = self.plugins.sinks(self.cfg.sinks) if self.cfg.sinks else []
        except Exception as exc:
            log.warning("sinks unavailable", error=str(exc))
            self.sinks = []
        if self.harness is None:
            self.harness = _build_harness(self.cfg, self.plugins, self.run_id, self.store)

    def _sft_progress(self) -> Optional[Callable[[int, float], None]]:
        if self.progress is None:
            return None
        return lambda step, loss: self.progress.sft(step, self.cfg.sft.steps, loss)

    # -- one step ---------------------------------------------------------------------------
    def _weights_blob(self) -> Any:
        if not self.cfg.run.checkpoint_blobs:
            return None
        import io

        import torch

        buf = io.BytesIO()
        torch.save(self.session.policy.state_dict(), buf)
        return self.store.blobs.put(buf.getvalue(), "application/x-torch-state-dict")

    def _put_json_async(self, obj: Any) -> BlobRef:
        """Encode now, write in the background: the blob's digest is known from its bytes,
        so the events can reference it while the file write and its fsync overlap with the
        checkpoint and the append. ``_join_writes`` waits before anything is committed."""
        data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ref = BlobRef(hashlib.sha256(data).hexdigest(), len(data), "application/json")

        def write() -> None:
            got = self.store.blobs.put(data, "application/json")
            if got.digest != ref.digest:  # content addressing makes this impossible; fail loudly if not
                raise RuntimeError(f"blob store returned digest {got.digest} for {ref.digest}")

        self._pending.append(self._pool.submit(write))
        return ref

    def _join_writes(self) -> None:
        pending, self._pending = self._pending, []
        for fut in pending:
            fut.result()  # re-raises a failed write: never commit events that reference a missing blob

    def _synced_event(self, step: int, synced: Any) -> PolicyUpdated:
        """A weight sync to the rollout server, as ``PolicyUpdated(target=<server>)``."""
        return PolicyUpdated(run_id=self.run_id, step=step, policy_version=self.session.policy_version,
                             digest=str(synced.get("digest") or self.session.policy.digest()),
                             adapter=synced.get("kind") == "lora",
                             target=str(synced.get("target") or synced.get("name") or "rollout-server"),
                             emitted_by=TRAINER)

    def _eval_event(self, step: int) -> EvalCompleted:
        t0 = time.perf_counter()
        res = self.session.evaluate("heldout", strict=True)
        self.timings["eval"] += time.perf_counter() - t0
        self.last_eval = dict(res.metrics)
        return EvalCompleted(run_id=self.run_id, step=step, policy_version=self.session.policy_version,
                             split="heldout", n=res.n, metrics=dict(res.metrics), item_scores=dict(res.item_scores),
                             branch="main", emitted_by=TRAINER)

    def _rollout_events(self, res: Any) -> list[RolloutCompleted]:
        """The step's ``RolloutCompleted`` batch. Full trajectories (text, token ids, log-probs,
        final reward, advantage) go to ONE blob per step: a blob write per rollout would cost
        more than the step on a small model. ``signals.trajectory_index`` locates a rollout in it."""
        t0 = time.perf_counter()
        ref = None
        if self.cfg.run.trajectories:
            groups: dict[str, Any] = {}
            for it, s in zip(res.items, res.samples):
                if it.group_id not in groups:
                    gold = it.task.gold if isinstance(it.task.gold, (str, int, float)) else None
                    groups[it.group_id] = {"task_id": it.task.task_id, "prompt": s.prompt, "gold": gold}
            ref = self._put_json_async({
                "run_id": self.run_id, "step": res.step, "groups": groups,
                "rollouts": [{
                    "rollout_id": it.rollout_id, "group_id": it.group_id, "text": s.text,
                    "token_ids": list(s.token_ids), "logprobs": [round(x, 5) for x in s.logprobs],
                    "finish_reason": s.finish_reason, "reward": it.verdict.reward, "reward_final": it.reward,
                    "mask": it.mask, "advantage": e["advantage"], "verdict": dict(it.verdict.details),
                } for it, s, e in zip(res.items, res.samples, res.extra)]})
        t1 = time.perf_counter()
        self.timings["blobs"] += t1 - t0
        out = []
        version = self.session.policy_version - (1 if res.updated else 0)  # the weights that sampled
        for i, (it, s, e) in enumerate(zip(res.items, res.samples, res.extra)):
            signals = dict(it.verdict.signals)
            signals.update({"entropy": e["entropy"], "advantage": None if e["advantage"] is None else round(e["advantage"], 5),
                            "reward_final": it.reward, "masked": not it.mask, "trajectory_index": i})
            out.append(RolloutCompleted(
                run_id=self.run_id, event_id=it.rollout_id, step=res.step, task_id=it.task.task_id,
                group_id=it.group_id, policy_version=version, reward=it.verdict.reward, correct=it.verdict.correct,
                strict_correct=it.strict.correct if it.strict is not None else None, split="train",
                infra_error=it.verdict.infra_error, truncated=s.truncated, length=len(s.token_ids),
                response_preview=s.text[:200], trajectory=ref, signals=signals, emitted_by=TRAINER))
        self.timings["events"] += time.perf_counter() - t1
        return out

    def run(self) -> RunOutcome:
        steps = self.cfg.run.steps
        status, message = "completed", ""
        if self.progress is not None:
            self.progress.start_run(self.run_id, self.mode, steps, self.session.step)
        try:
            while self.session.step < steps:
                self._one_step()
        except (RequiredPluginFailed, Exception) as exc:
            from evo_core.trainer.session import VerifierFailed

            if not isinstance(exc, (RequiredPluginFailed, VerifierFailed)):
                raise
            status, message = "failed", str(exc)
            fail = PluginFailed(run_id=self.run_id, plugin=getattr(self.session, "domain_plugin", "?"),
                                hook="verify", error_type=type(exc.__cause__ or exc).__name__, message=message[:2000],
                                required=True, step=self.session.step + 1, emitted_by=TRAINER)
            self._append([fail, RunFinished(run_id=self.run_id, status="failed", step=self.session.step,
                                            message=message, emitted_by=TRAINER)])
            raise RunError(f"run {self.run_id} stopped: {message}") from None
        except KeyboardInterrupt:
            self._append([RunFinished(run_id=self.run_id, status="stopped", step=self.session.step,
                                      message="interrupted", emitted_by=TRAINER)])
            raise
        finally:
            if self.progress is not None:
                self.progress.end_run()
            self._pool.shutdown(wait=True)
        ctx = self._ctx([], None, [], final=True)
        t0 = time.perf_counter()
        self._guarded("on_run_end", ctx)
        self.timings["harness"] += time.perf_counter() - t0
        summary = {"final_eval": self.last_eval, "harness_version": self.state.harness_version,
                   "policy_version": self.session.policy_version, "main_policy_version": self.state.main_policy_version,
                   "diagnoses": dict(self.state.diagnosis_counts)}
        self._append([RunFinished(run_id=self.run_id, status=status, step=self.session.step, summary=summary,
                                  message=message, emitted_by=TRAINER)])
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                pass
        return RunOutcome(self.run_id, status, self.session.step, summary, dict(self.timings))

    def _guarded(self, method: str, ctx: StepContext) -> None:
        """Call the harness; if it raises, record ``PluginFailed`` and keep training (the
        harness is rebuilt from the log on resume, so nothing is lost but this call)."""
        try:
            getattr(self.harness, method)(ctx)
        except Exception as exc:
            log.error("harness failed", method=method, error=f"{type(exc).__name__}: {exc}")
            self._append([PluginFailed(run_id=self.run_id, plugin=type(self.harness).__name__, hook=f"Harness.{method}",
                                       error_type=type(exc).__name__, message=str(exc)[:2000], step=self.session.step,
                                       emitted_by=TRAINER)])

    def _ctx(self, rollouts: Sequence[RolloutCompleted], step_ev: Optional[StepCompleted],
             evals: Sequence[EvalCompleted], *, final: bool = False) -> StepContext:
        return StepContext(run_id=self.run_id, step=self.session.step, state=self.state, rollouts=list(rollouts),
                           step_event=step_ev, evals=list(evals), session=self.session, emit=self.emit, store=self.store,
                           final=final, extra={"config": self.config_dict, "plugins": self.plugins})  # type: ignore[arg-type]

    def _one_step(self) -> None:
        t0 = time.perf_counter()
        res = self.session.rl_step(self.state)
        self.timings["compute"] += time.perf_counter() - t0
        rollouts = self._rollout_events(res)
        step_ev = StepCompleted(run_id=self.run_id, step=res.step, policy_version=res.policy_version,
                                harness_version=self.state.harness_version,
                                metrics={k: (None if v is None else float(v)) for k, v in res.metrics.items()},
                                emitted_by=TRAINER)
        batch: list[Event] = [*rollouts, step_ev]
        if res.updated:
            td = time.perf_counter()
            digest = self.session.policy.digest()
            self.timings["digest"] += time.perf_counter() - td
            batch.append(PolicyUpdated(run_id=self.run_id, step=res.step, policy_version=res.policy_version,
                                       digest=digest, checkpoint=self._weights_blob(),
                                       caused_by=(step_ev.event_id,), emitted_by=TRAINER))
        if res.synced:
            batch.append(self._synced_event(res.step, res.synced))
        batch += self._plugin_failed(res.failures, res.step)
        evals = []
        if res.step % self.cfg.run.eval_every == 0 or res.step == self.cfg.run.steps:
            evals = [self._eval_event(res.step)]
            batch += evals
        t1 = time.perf_counter()
        self.ckpt.save(res.step, self.session.resume_state())  # before the append: resume needs it
        t2 = time.perf_counter()
        self.timings["checkpoint"] += t2 - t1
        self._join_writes()  # the step's trajectory blob is on disk before its events are committed
        self.timings["blobs"] += time.perf_counter() - t2
        self._append(batch)
        self.ckpt.gc(res.step)
        self.session.restored = False
        t2 = time.perf_counter()
        self._guarded("on_step", self._ctx(rollouts, step_ev, evals, final=res.step == self.cfg.run.steps))
        self.timings["harness"] += time.perf_counter() - t2
        if self.session.restored:
            # the harness put the main line back: record the weights now in force, and make the
            # resume checkpoint of this step match them
            self.session.restored = False
            self.ckpt.save(res.step, self.session.resume_state())
            self._append([PolicyUpdated(run_id=self.run_id, step=res.step, policy_version=self.session.policy_version,
                                        digest=self.session.policy.digest(), target="restore", emitted_by=TRAINER)])
        if self.progress is not None:
            self.progress.step(res.step, res.metrics, self.last_eval if evals else None)
        if self.on_step is not None:
            self.on_step(res.step, res.metrics)


def run_all(cfg: RunConfig, store: Any, *, harness: Optional[str] = None, plugins: Optional[PluginManager] = None,
            progress: Any = None) -> list[RunOutcome]:
    """One run per harness mode in ``cfg.run.harnesses`` (or just ``harness``), same seed."""
    modes = [harness] if harness else list(cfg.run.harnesses)
    out = []
    for mode in modes:
        if mode not in ("fixed", "evolving"):
            raise ConfigError(f"--harness must be fixed or evolving, got {mode!r}")
        loop = RunLoop(cfg.for_harness(mode), store, plugins=plugins, progress=progress)
        loop.start()
        out.append(loop.run())
    return out


def resume_run(cfg: RunConfig, store: Any, run_id: str, *, plugins: Optional[PluginManager] = None,
               progress: Any = None) -> RunOutcome:
    started = next(iter(store.events(run_stream(run_id))), None)
    if started is None:
        raise RunError(f"run {run_id!r} not found in {store.url}")
    mode = getattr(started, "harness_mode", "evolving")
    loop = RunLoop(cfg.for_harness(mode), store, plugins=plugins, progress=progress)
    loop.resume(run_id)
    return loop.run()
