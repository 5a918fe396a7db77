"""The run orchestrator: one RL run as an append-only event log.

Per run: ``RunStarted`` (the full resolved config, its sha256, seed, harness mode), the
starting checkpoint (``PolicyUpdated`` at step 0, its weights in the blob store) and its
validation and test evaluations. Per step, ONE append holds the step's ``RolloutCompleted``
batch (trajectories in one blob), ``StepCompleted`` (metrics, the resume checkpoint's path
and digest), ``PolicyUpdated``, any ``PluginFailed``, the evaluations that are due, *and the
harness pass over that step* (its diagnoses, proposals, backtests, decisions and a closing
``HarnessPassCompleted``). A step and its harness work are committed together or not at all.

A step's batch is folded into the harness state as soon as its pass is done, and committed
after the *next* step's compute: its resume checkpoint (a CPU snapshot taken when the step
ended) is serialised, hashed and written while that compute runs, so the commit never waits
for it. Nothing reads the store in between; a crash loses at most the folded, uncommitted step,
which a resume recomputes. A restore the harness decided (``PolicyUpdated(target="restore")``)
is carried out once the step is folded. ``--resume`` loads the resume checkpoint of the last committed step, carries out any
restore that step committed, and goes on: an uncommitted step, and its harness pass, are
recomputed from the checkpoint, deterministically, never duplicated.

Test-split evaluations are for the report only: they are logged, and nothing in the harness
reads them. At the end, the main line (the checkpoint the policy gate kept) is evaluated on
the test split too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence

import attrs
import structlog

from evo_core import faults
from evo_core.checkpoints import CheckpointError, Checkpoints, snapshot
from evo_core.code_version import code_version
from evo_core.config import ConfigError, RunConfig, config_hash
from evo_core.harness import EvidenceWindow, HarnessEngine, LivePort, PassInput, build_harness
from evo_core.plugins import PluginFailure, PluginManager
from evo_core.run_setup import RunError, build_session
from evo_core.state import HarnessState, apply, fold
from evo_core.store import run_stream, seal_run_finished
from evo_core.store.blobs import WriteBehindBlobs
from evo_core.store.lease import LeaseHeld, RunLease
from evo_core.trainer.ranks import RankLost
from evo_core.trainer.evaluation import VerifierFailed, eval_labels
from evo_core.trainer.oracle import METRIC_PREFIX, label_totals
from evo_core.trainer.port import SNAPSHOT_MEDIA, SessionPort
from evo_core.trainer.step_events import TRAINER, rollout_events, trajectory_payload
from evo_events import (
    BlobRef,
    EvalCompleted,
    Event,
    PolicyUpdated,
    RunFinished,
    RunResumed,
    RunStarted,
    StepCompleted,
)

log = structlog.get_logger("evo.run")

__all__ = ["RunLoop", "RunOutcome", "RunError", "run_all", "resume_run", "code_version"]


@attrs.define
class RunOutcome:
    run_id: str
    status: str
    steps: int
    summary: dict[str, Any] = attrs.Factory(dict)
    timings: dict[str, float] = attrs.Factory(dict)


@attrs.define
class _PendingCommit:
    """A step folded into the harness state whose append runs on the commit worker, after its
    resume checkpoint and trajectory blob are on disk."""

    step: int
    batch: list[Event]
    version: int  # the stream's version before the batch
    resume: dict[str, str]  # the StepCompleted's own resume_checkpoint dict
    checkpoint: Any  # the future of Checkpoints.save
    blob_writes: list[Any]  # the futures of the blob writes its events name
    commit: Any = None  # the future of _commit_behind: the seconds the worker spent


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class RunLoop:
    """Runs (or resumes) one run of ``cfg`` (already resolved for one harness arm)."""

    def __init__(self, cfg: RunConfig, store: Any, *, plugins: Optional[PluginManager] = None,
                 progress: Optional[Any] = None, on_step: Optional[Callable[[int, dict], None]] = None,
                 session_factory: Callable[..., tuple[Any, dict[str, Any]]] = build_session) -> None:
        if len(cfg.run.harnesses) != 1:
            raise RunError("RunLoop runs one harness arm; use run_all() for several")
        self.cfg = cfg
        self.mode = cfg.mode
        self.store = store
        self.plugins = plugins or PluginManager()
        self.progress = progress
        self.on_step = on_step
        self.session_factory = session_factory
        self.state = HarnessState()
        self.oracle_totals: dict[str, int] = {}  # "scope.purpose" -> oracle labels this run's log holds
        self.version = 0
        self.stream = ""
        self.run_id = ""
        self.timings = {"compute": 0.0, "events": 0.0, "blobs": 0.0, "append": 0.0, "observe": 0.0,
                        "digest": 0.0, "checkpoint": 0.0, "harness": 0.0, "eval": 0.0}
        self.sinks: list[Any] = []
        self.last_eval: dict[str, Any] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evo-blobs")
        self.blobs: Any = None  # the store's blobs, written behind (_begin); joined before each commit
        # the resume checkpoint is serialised, hashed and written while the next step computes;
        # the step's commit waits for it (_persist_pending). Two workers: the weights' digest
        # (awaited before the harness pass) does not queue behind a checkpoint
        self._ck_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="evo-checkpoint")
        # the append itself runs on one more worker, while the next step computes: one commit in
        # flight at a time, joined before anything else is folded or appended (_persist_pending)
        self._commit_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evo-commit")
        self._pending: Optional[_PendingCommit] = None  # the last step's batch: folded, its commit in flight
        self.harness: Optional[HarnessEngine] = None
        self.lease: Optional[RunLease] = None  # this process's lease on the run (one writer per run)

    # -- appending --------------------------------------------------------------------------
    def _append(self, events: Sequence[Event], *, final: bool = False) -> None:
        """Append at the stream's version and fold (after the step still waiting for its commit).
        ``final``: the sealed ``RunFinished`` batch, after which nothing may be appended (a sink
        that fails on it is logged, not recorded)."""
        self._persist_pending()
        if not events:
            return
        t0 = time.perf_counter()
        if self.lease is not None:
            self.lease.renew()  # the heartbeat; LeaseLost (another writer took over) stops the loop unsealed
        with _uninterrupted():  # the commit and the version the loop holds move together
            self.store.append(self.stream, list(events), expected_version=self.version)
            for ev in events:
                self.version += 1
                apply(self.state, ev, self.version)
        t1 = time.perf_counter()
        self.timings["append"] += t1 - t0
        self._observe(events, final=final)
        self.timings["observe"] += time.perf_counter() - t1

    def _fold_step(self, step: int, batch: list[Event], resume: dict[str, str], checkpoint: Any) -> None:
        """Fold a finished step's batch now (the next step samples under its decisions) and hand
        its commit to the commit worker, which appends it while the next step computes."""
        self._persist_pending()
        writes = self.blobs.take() if self.blobs is not None else []
        with _uninterrupted():
            p = _PendingCommit(step, batch, self.version, resume, checkpoint, writes)
            for ev in batch:
                self.version += 1
                apply(self.state, ev, self.version)
            p.commit = self._commit_pool.submit(self._commit_behind, p)
            self._pending = p

    def _commit_behind(self, p: _PendingCommit) -> tuple[float, float]:
        """On the commit worker: the step's checkpoint and trajectory blob on disk first (resume
        and the events' blob references need them), then one append at the version it was folded
        at. A signal never lands here (only the main thread takes them); a crash leaves the step
        uncommitted, and resume recomputes it. (seconds waiting for the writes, seconds appending)"""
        faults.point("before_commit")
        t0 = time.perf_counter()
        p.resume.update(dict(p.checkpoint.result()))  # a failed write raises here: nothing is committed
        for write in p.blob_writes:
            write.result()
        t1 = time.perf_counter()
        if self.lease is not None:
            self.lease.renew()
        self.store.append(self.stream, p.batch, expected_version=p.version)
        return t1 - t0, time.perf_counter() - t1

    def _persist_pending(self) -> None:
        """Wait for the folded step's commit (re-raising its failure: then nothing of it is
        committed, and the step stays pending), then tell the observers."""
        p = self._pending
        if p is None:
            return
        t0 = time.perf_counter()
        waited, appended = p.commit.result()
        with _uninterrupted():
            self._pending = None
        t1 = time.perf_counter()
        # on the critical path: only the wait; the worker's own time is reported beside it
        self.timings["append"] += t1 - t0
        self.timings["commit_behind"] = self.timings.get("commit_behind", 0.0) + waited + appended
        self._observe(p.batch)
        self.timings["observe"] += time.perf_counter() - t1
        faults.point("after_commit")
        self.ckpt.gc(p.step)

    def _finish(self, finished: RunFinished, preceding: Sequence[Event] = ()) -> None:
        """Seal the run: ``RunFinished`` carries the stream's head (``evo verify`` detects a cut
        or extended tail), and is the last event of the batch."""
        self._persist_pending()
        sealed = seal_run_finished(self.store, finished, expected_version=self.version, preceding=list(preceding))
        self._append([*preceding, sealed], final=True)
        head = self.store.head(self.stream)
        log.info("run sealed", run_id=self.run_id, status=finished.status,
                 head=f"{head.version}:{head.hash}", verify=f"evo verify {self.run_id} --expect {head.version}:{head.hash}")

    def _observe(self, events: Sequence[Event], *, final: bool = False) -> None:
        failures: list[Event] = []
        for sink in self.sinks:
            try:
                sink.handle(events)
            except Exception as exc:  # a sink never stops training
                failures.append(PluginFailure.of(getattr(sink, "name", "?"), "Sink.handle", exc)
                                .to_event(self.run_id, self.state.step, TRAINER))
        with self.plugins.capture_failures() as found:
            self.plugins.on_events(self.run_id, list(events))
        failures += [f.to_event(self.run_id, self.state.step, TRAINER) for f in found]
        if self.progress is not None and hasattr(self.progress, "events"):
            self.progress.events(events)
        if failures and final:
            for f in failures:
                log.error("sink failed on the sealed batch", plugin=f.plugin, error=f.message)  # type: ignore[attr-defined]
        elif failures:
            self.store.append(self.stream, failures, expected_version=self.version)
            for ev in failures:
                self.version += 1
                apply(self.state, ev, self.version)

    # -- start / resume ---------------------------------------------------------------------
    def start(self, run_id: Optional[str] = None) -> None:
        self.run_id = run_id or f"{self.cfg.run.name}-{(self.cfg.run.arm or self.mode).replace('/', '-').replace('+', '-')}-{uuid.uuid4().hex[:8]}"
        self.stream = run_stream(self.run_id)
        if self.store.stream_version(self.stream):
            raise RunError(f"run {self.run_id!r} already exists in {self.store.url}; use --resume to continue it")
        self._check_store_writable()
        self._check_plugins()
        self.session, self.sft_info = self.session_factory(self.cfg, self.plugins, on_sft_step=self._sft_progress())
        self.session.id_salt = self.run_id
        self.ckpt = Checkpoints(self.cfg.run.checkpoint_dir, self.run_id)
        self.session.checkpoint_dir = self.ckpt.dir  # where a sharded (ZeRO) optimizer writes its shards
        cfg_dict = self.cfg.to_dict()
        first: list[Event] = [RunStarted(run_id=self.run_id, config=cfg_dict, config_hash=config_hash(cfg_dict),
                                         seed=self.cfg.run.seed, harness_mode=self.mode, code_version=code_version(),
                                         started_at=_now(), emitted_by=TRAINER)]
        first += [f.to_event(self.run_id, 0, TRAINER) for f in self.plugins.load_failures]
        first.append(PolicyUpdated(run_id=self.run_id, step=0, policy_version=0, digest=self.session.policy.digest(),
                                   checkpoint=self._start_blob(), emitted_by=TRAINER))
        synced = self.session.sync_engine()  # the server must sample from the SFT start, not its base model
        if synced:
            first.append(self._synced_event(0, synced))
        evals: list[Event] = []
        if self.cfg.run.eval_at_start:
            try:
                evals = self._evals(0, test=True)
            except VerifierFailed as exc:  # nothing is logged yet: the run never started
                raise RunError(f"cannot start: {exc}") from None
        self.ckpt.save(0, self.session.resume_state())
        self._begin()
        self._take_lease()
        try:
            if self.store.stream_version(self.stream):
                raise RunError(f"run {self.run_id!r} already exists in {self.store.url}; use --resume to continue it")
            self._append(first + evals)
        except BaseException:
            self._drop_lease()
            raise
        self.evidence.add_step(0, [], None, evals)  # type: ignore[arg-type]  (the starting checkpoint's evals)
        log.info("run started", run_id=self.run_id, arm=self.cfg.run.arm or self.mode,
                 config_hash=first[0].config_hash[:12], sft=self.sft_info or None)

    def resume(self, run_id: str) -> None:
        """Continue ``run_id`` from its last committed step, holding its lease: a second
        writer is refused before it reads or touches anything of the run."""
        self.run_id = run_id
        self.stream = run_stream(run_id)
        if not self.store.stream_version(self.stream):
            raise RunError(f"run {run_id!r} not found in {self.store.url}")
        self._check_store_writable()
        self._take_lease()
        try:
            self._resume(run_id)
        except BaseException:
            self._drop_lease()
            raise

    def _take_lease(self) -> None:
        try:
            self.lease = RunLease(self.store, self.run_id).acquire()
        except LeaseHeld as exc:
            raise RunError(str(exc)) from None
        if self.lease.took_over:
            log.warning("run lease taken over", run_id=self.run_id, previous_holder=self.lease.took_over)

    def _drop_lease(self) -> None:
        if self.lease is not None:
            try:
                self.lease.release()
            except Exception as exc:  # the lease lapses on its own (pid gone / timeout)
                log.warning("run lease not released", run_id=self.run_id, error=str(exc))
            self.lease = None

    def _resume(self, run_id: str) -> None:
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
        self._check_store_writable()
        steps = [e for e in events if isinstance(e, StepCompleted)]
        committed = steps[-1].step if steps else 0
        self.session, self.sft_info = self.session_factory(self.cfg, self.plugins, sft=False)
        self.session.id_salt = self.run_id
        recorded = steps[-1].resume_checkpoint if steps else None
        self.ckpt = Checkpoints.continuing(recorded, self.cfg.run.checkpoint_dir, run_id)
        self.session.checkpoint_dir = self.ckpt.dir
        try:
            self.session.load_resume_state(Checkpoints.load(committed, recorded, self.ckpt.path(committed)))
        except CheckpointError as exc:
            raise RunError(str(exc)) from None
        self.state = fold(events)
        self.oracle_totals = label_totals(events)
        client = getattr(self.session, "oracle", None)
        if client is not None:  # the budget spent so far, folded from the log (exact across a crash)
            client.counts.resumed(self.oracle_totals)
        self.version = len(events)
        # a restore committed with the last step was carried out after its checkpoint was written
        for ev in events:
            if isinstance(ev, PolicyUpdated) and ev.target == "restore" and ev.step == committed \
                    and ev.policy_version > self.session.max_version:
                self._restore(ev)
        self._begin()
        resumed: list[Event] = [RunResumed(run_id=run_id, from_step=committed, resumed_at=_now(), emitted_by=TRAINER)]
        synced = self.session.sync_engine()
        if synced:
            resumed.append(self._synced_event(committed, synced))
        self._append(resumed)
        self.evidence.prefill(events)
        log.info("run resumed", run_id=run_id, from_step=committed)

    def _begin(self) -> None:
        try:
            self.sinks = self.plugins.sinks(self.cfg.sinks) if self.cfg.sinks else []
        except Exception as exc:
            log.warning("sinks unavailable", error=str(exc))
            self.sinks = []
        self.harness = build_harness(self.cfg.harness, self.plugins, run_id=self.run_id)
        hcfg = self.harness.config
        self.evidence = EvidenceWindow(self.run_id, hcfg.window_steps)
        # the optimizer state travels with a main-line snapshot only where a rollback may load it
        self.blobs = WriteBehindBlobs(self.store.blobs, self._pool)
        self.port = SessionPort(self.session, self.blobs, self.run_id, with_optimizer=self.mode == "evolving")
        self.port.on_activity = getattr(self.progress, "backtest", None)

    def _check_store_writable(self) -> None:
        check = getattr(self.store, "check_writable", None)
        if callable(check):
            try:
                check()
            except Exception as exc:
                raise RunError(f"the store cannot be written: {exc}") from None

    def _check_plugins(self) -> None:
        """A plugin that failed to load is logged (``PluginFailed`` at run start); when the
        config names something that plugin would have provided, the run does not start."""
        if not self.plugins.load_failures:
            return
        for f in self.plugins.load_failures:
            log.error("plugin failed to load", plugin=f.plugin, error=f"{f.error_type}: {f.message}")
        named = {("domain", self.cfg.task.domain)}
        installed = {"domain": set(self.plugins.domains())}
        h = self.cfg.harness
        for kind, table, getter in (("diagnostic", "diagnostics", self.plugins.diagnostics),
                                    ("gate", "gates", self.plugins.gates), ("proposer", "proposers", self.plugins.proposers)):
            installed[kind] = set(getter())
            named |= {(kind, n) for n, p in (h.get(table) or {}).items()
                      if not (isinstance(p, dict) and (p.get("enabled") is False or p.get("spec")))}
        missing = sorted(f"{k} {n!r}" for k, n in named if n not in installed[k])
        if missing:
            broken = "; ".join(self.plugins.load_errors)
            raise RunError(f"the config names {', '.join(missing)}, which is not installed: {broken}")

    def _sft_progress(self) -> Optional[Callable[[int, float], None]]:
        if self.progress is None:
            return None
        return lambda step, loss: self.progress.sft(step, self.cfg.sft.steps, loss)

    # -- pieces of a step -------------------------------------------------------------------
    def _start_blob(self) -> Optional[BlobRef]:
        """The starting weights: the first main line (what a rollback, an export of the main
        line and the report's main-line evaluation read); the optimizer state travels only
        where a rollback may load it."""
        return self.store.blobs.put(self.session.weights_bytes(with_optimizer=self.mode == "evolving"), SNAPSHOT_MEDIA)

    def _weights_blob(self) -> Optional[BlobRef]:
        if not self.cfg.run.checkpoint_blobs:
            return None
        return self.store.blobs.put(self.session.weights_bytes(), SNAPSHOT_MEDIA)

    def _put_json_async(self, obj: Any) -> BlobRef:
        """Encode now, write behind: the file write and its fsync overlap with the checkpoint
        and the harness pass. ``_join_writes`` waits before anything is committed."""
        data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        return self.blobs.put(data, "application/json")

    def _join_writes(self) -> None:
        if self.blobs is not None:
            self.blobs.join()  # re-raises a failed write: never commit events that reference a missing blob

    def _oracle_labels(self) -> dict[str, float]:
        """The oracle labels drawn since the last call (``oracle_labels.<scope>.<purpose>``, see
        ``evo_core.trainer.oracle``), added to the run's totals; {} for a session without an
        ``OracleClient``. A step that never commits (a crash) is recomputed on resume, and only
        the recomputation's labels reach the log."""
        client = getattr(self.session, "oracle", None)
        if client is None:
            return {}
        out = client.counts.take_unlogged()
        for k, v in out.items():
            key = k[len(METRIC_PREFIX) + 1:]
            self.oracle_totals[key] = self.oracle_totals.get(key, 0) + int(v)
        return out

    def _synced_event(self, step: int, synced: Any) -> PolicyUpdated:
        """A weight sync to the rollout server, as ``PolicyUpdated(target=<server>)``."""
        return PolicyUpdated(run_id=self.run_id, step=step, policy_version=self.session.policy_version,
                             digest=str(synced.get("digest") or self.session.policy.digest()),
                             adapter=synced.get("kind") == "lora",
                             target=str(synced.get("target") or synced.get("name") or "rollout-server"),
                             emitted_by=TRAINER)

    def _eval_event(self, step: int, split: str, *, branch: str = "main", policy: Any = None,
                    policy_version: Optional[int] = None) -> EvalCompleted:
        t0 = time.perf_counter()
        version = self.session.policy_version if policy_version is None else policy_version
        if self.progress is not None and hasattr(self.progress, "evaluating"):
            self.progress.evaluating(step, split)
        res = self.session.evaluate(split, strict=True, policy=policy, policy_version=version)
        self.timings["eval"] += time.perf_counter() - t0
        if split == "validation" and branch == "main":
            self.last_eval = dict(res.metrics)
        if self.progress is not None and hasattr(self.progress, "evaluated"):
            self.progress.evaluated(step, split, dict(res.metrics))
        return EvalCompleted(run_id=self.run_id, step=step, policy_version=version, split=split, n=res.n,
                             metrics=dict(res.metrics), item_scores=dict(res.item_scores), branch=branch,
                             emitted_by=TRAINER)

    def _evals(self, step: int, *, test: bool) -> list[Event]:
        out: list[Event] = [self._eval_event(step, "validation")] if self._validation_paid(step) else []
        if test and self.session.splits.get("test"):
            out.append(self._eval_event(step, "test"))
        return out

    def _validation_paid(self, step: int) -> bool:
        """Whether the oracle budget pays a whole validation evaluation. When it does not, the
        evaluation is skipped (the gates see no new one; the last value stands) and the refusal
        is recorded in the step's ``oracle_budget.refused.validation``."""
        client = getattr(self.session, "oracle", None)
        if client is None or client.counts.left() is None:  # no cap
            return True
        cost = eval_labels(len(self.session.splits.get("validation") or ()), self.cfg.eval)
        if client.counts.can_pay("validation", cost):
            return True
        log.warning("validation evaluation skipped: the oracle budget cannot pay it", run_id=self.run_id, step=step,
                    labels=cost, left=client.counts.left())
        return False

    def _oracle_budget(self) -> dict[str, float]:
        """The budget's metrics for this step: labels left, and labels refused since the last step."""
        client = getattr(self.session, "oracle", None)
        return client.counts.take_budget() if client is not None else {}

    def _restore(self, ev: PolicyUpdated) -> None:
        """Carry out a committed restore: the main line's weights, under the version the log named."""
        if ev.checkpoint is None:
            raise RunError(f"restore at step {ev.step} names no checkpoint")
        self.session.restore(self.store.blobs.get(ev.checkpoint), ev.policy_version)
        if self.session.policy.digest() != ev.digest:
            raise RunError(f"restore at step {ev.step}: the restored weights do not match the digest the log recorded")
        self.session.sync_engine()

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        """Train to ``run.steps`` and seal the run; the run's lease is dropped however this ends."""
        try:
            return self._run()
        finally:
            self._drop_lease()

    def _run(self) -> RunOutcome:
        steps = self.cfg.run.steps
        status, message = "completed", ""
        if self.progress is not None:
            self.progress.start_run(self.run_id, self.cfg.run.arm or self.mode, steps, self.session.step)
        previous = _install_sigterm()
        try:
            while self.session.step < steps:
                self._one_step()
            self._finish_evals()
        except VerifierFailed as exc:
            status, message = "failed", str(exc)
            fail = PluginFailure.of(getattr(self.session, "domain_plugin", "?"), "verify", exc.__cause__ or exc,
                                    required=True).to_event(self.run_id, self.session.step + 1, TRAINER)
            self._finish(RunFinished(run_id=self.run_id, status="failed", step=self.session.step, message=message,
                                     emitted_by=TRAINER), preceding=[fail])
            raise RunError(f"run {self.run_id} stopped: {message}") from None
        except RankLost as exc:
            # a peer rank died (or went silent past [distributed] timeout_s): this rank alone holds
            # the store, so it seals what was committed as stopped; the step in flight was not
            # committed and --resume recomputes it. The launcher's SIGTERM, which follows a dead
            # rank, must not cut the seal short.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self._join_writes()
            self._finish(RunFinished(run_id=self.run_id, status="stopped", step=self.state.step, message=str(exc),
                                     emitted_by=TRAINER))
            log.error("run stopped: a rank is gone", run_id=self.run_id, step=self.state.step, error=str(exc),
                      resume=f"evo run CONFIG --resume {self.run_id} (same launcher and ranks)")
            raise RunError(f"run {self.run_id} stopped at step {self.state.step}: {exc}") from None
        except KeyboardInterrupt as exc:
            why = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            self._join_writes()
            self._finish(RunFinished(run_id=self.run_id, status="stopped", step=self.session.step, message=why,
                                     emitted_by=TRAINER))
            log.warning("run stopped", run_id=self.run_id, step=self.session.step, reason=why,
                        resume=f"evo run CONFIG --resume {self.run_id}")
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            if self.progress is not None:
                self.progress.end_run()
            if self._pending is not None:  # a failed commit's checkpoint is not recorded anywhere
                with contextlib.suppress(Exception):
                    self._pending.checkpoint.result()
                with contextlib.suppress(Exception):
                    self._pending.commit.result()
            self._commit_pool.shutdown(wait=True)
            self._pool.shutdown(wait=True)
            self._ck_pool.shutdown(wait=True)
        self.timings["backtest_branches"] = self.port.branch_s
        self.timings["features"] = getattr(self.session, "features_s", 0.0)
        summary = {"final_eval": self.last_eval, "harness_version": self.state.harness_version,
                   "policy_version": self.session.policy_version, "main_policy_version": self.state.main_policy_version,
                   "diagnoses": dict(self.state.diagnosis_counts)}
        tail = self._oracle_labels()  # the main line's last test evaluation, after the last step
        if tail:
            summary["oracle_labels_after_last_step"] = tail
            summary["oracle_labels"] = {k: self.oracle_totals.get(k, 0) for k in sorted(self.oracle_totals)}
        self._finish(RunFinished(run_id=self.run_id, status=status, step=self.session.step, summary=summary,
                                 message=message, emitted_by=TRAINER))
        self.ckpt.remove()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                pass
        return RunOutcome(self.run_id, status, self.session.step, summary, dict(self.timings))

    def _finish_evals(self) -> None:
        """For the report: the main line's weights on the test split (the final checkpoint's
        test evaluation is logged with the last step)."""
        main = self.state.main
        if not self.session.splits.get("test") or main.checkpoint is None \
                or main.policy_version == self.session.policy_version:
            return
        policy = self.session.detached_policy(self.store.blobs.get(BlobRef(**main.checkpoint)))
        self._append([self._eval_event(self.session.step, "test", branch="mainline", policy=policy,
                                       policy_version=main.policy_version)])

    def _test_due(self, step: int) -> bool:
        every = self.cfg.eval.test_every or self.cfg.run.eval_every
        return step % every == 0 or step == self.cfg.run.steps

    def _one_step(self) -> None:
        t0 = time.perf_counter()
        res = self.session.rl_step(self.state)
        self.timings["compute"] += time.perf_counter() - t0
        faults.point("after_compute")
        t1 = time.perf_counter()
        traj = self._put_json_async(trajectory_payload(self.run_id, res)) if self.cfg.run.trajectories else None
        self.timings["blobs"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        # a CPU snapshot of the state now (the next update and a restore change the live tensors),
        # written off the critical path; the weights' digest first (hashing releases the GIL)
        digest_fut = self._ck_pool.submit(self.session.policy.digest) if res.updated else None
        ck_fut = self._ck_pool.submit(self.ckpt.save, res.step, snapshot(self.session.resume_state()))
        self.timings["checkpoint"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        rollouts = rollout_events(self.run_id, res, traj)
        resume: dict[str, str] = {}  # the event's own dict, filled with the path and sha256 before the commit
        step_ev = StepCompleted(run_id=self.run_id, step=res.step, policy_version=res.policy_version,
                                harness_version=self.state.harness_version,
                                metrics={k: (None if v is None else float(v)) for k, v in res.metrics.items()},
                                resume_checkpoint=resume, emitted_by=TRAINER)
        batch: list[Event] = [*rollouts, step_ev]
        self.timings["events"] += time.perf_counter() - t1
        if res.updated:
            td = time.perf_counter()
            assert digest_fut is not None
            digest = digest_fut.result()
            self.timings["digest"] += time.perf_counter() - td
            batch.append(PolicyUpdated(run_id=self.run_id, step=res.step, policy_version=res.policy_version,
                                       digest=digest, checkpoint=self._weights_blob(),
                                       caused_by=(step_ev.event_id,), emitted_by=TRAINER))
        if res.synced:
            batch.append(self._synced_event(res.step, res.synced))
        batch += [f.to_event(self.run_id, res.step, TRAINER) for f in res.failures]
        evals: list[Event] = []
        if res.step % self.cfg.run.eval_every == 0 or res.step == self.cfg.run.steps:
            evals = self._evals(res.step, test=self._test_due(res.step))
            batch += evals
        faults.point("after_evals")
        batch += self._harness_pass(res.step, batch, rollouts, step_ev, evals)
        # every oracle label this commit drew (the step's audit, re-grades and training reward,
        # its evaluations, its harness pass's A/B branches), by scope and purpose; the dict is
        # the event's own and nothing has read these keys yet: the step is not committed
        step_ev.metrics.update(self._oracle_labels())
        step_ev.metrics.update(self._oracle_budget())
        self._fold_step(res.step, batch, resume, ck_fut)
        for ev in batch:
            if isinstance(ev, PolicyUpdated) and ev.target == "restore":
                self._restore(ev)
                log.info("restored the main line", step=res.step, policy_version=ev.policy_version)
        faults.point("after_restore")
        if self.progress is not None:
            self.progress.step(res.step, res.metrics, self.last_eval if evals else None)
        if self.on_step is not None:
            self.on_step(res.step, res.metrics)

    def _harness_pass(self, step: int, batch: Sequence[Event], rollouts: Sequence[Any], step_ev: StepCompleted,
                      evals: Sequence[Event]) -> list[Event]:
        """The harness's events for this step, computed before the step is committed. A harness
        that raises is recorded as ``PluginFailed``; the step commits without its pass."""
        assert self.harness is not None
        t0 = time.perf_counter()
        pre = self.state.copy()
        for ev in batch:
            apply(pre, ev)
        self.evidence.add_step(step, rollouts, step_ev, evals)  # type: ignore[arg-type]
        try:
            out = self.harness.new_pass(PassInput(step=step, state=pre, evidence=self.evidence, evals=evals,  # type: ignore[arg-type]
                                                  port=LivePort(self.port), final=step == self.cfg.run.steps,
                                                  seed=self.cfg.run.seed)).run()
        except (VerifierFailed, KeyboardInterrupt):
            raise
        except Exception as exc:
            log.error("harness failed", step=step, error=f"{type(exc).__name__}: {exc}")
            out = [PluginFailure.of("harness", "run_pass", exc).to_event(self.run_id, step, TRAINER)]
        self.timings["harness"] += time.perf_counter() - t0
        return out


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the run is marked stopped and can be resumed. The CLI
    exits with ``exit_code`` (128 + SIGTERM, what a shell reports for a process it killed)."""

    exit_code = 143


class _Shield:
    """SIGTERM held while a batch is committed and folded: raised in the middle, it would leave
    the loop's stream version behind the store's, and the stop could not be sealed."""

    depth = 0
    pending = False


def _terminate(signum: int, frame: Any) -> None:
    if _Shield.depth:
        _Shield.pending = True
        return
    raise Terminated()


@contextlib.contextmanager
def _uninterrupted() -> Any:
    _Shield.depth += 1
    try:
        yield
    finally:
        _Shield.depth -= 1
    # reached only when the commit succeeded: its own error wins (a Terminated here would hide
    # it), and a held stop stays pending until the next commit completes
    if _Shield.depth == 0 and _Shield.pending:
        _Shield.pending = False
        raise Terminated()


def _install_sigterm() -> Any:
    """SIGTERM stops the run like Ctrl-C (main thread only: signals cannot be set elsewhere)."""
    try:
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _terminate)
        return previous
    except ValueError:
        return None


def run_all(cfg: RunConfig, store: Any, *, harness: Optional[str] = None, plugins: Optional[PluginManager] = None,
            progress: Any = None, session_factory: Callable[..., Any] = build_session) -> list[RunOutcome]:
    """One run per harness arm in ``cfg.run.harnesses`` (or just ``harness``), same seed and data."""
    arms = [harness] if harness else list(cfg.run.harnesses)
    out = []
    for arm in arms:
        try:
            resolved = cfg.for_arm(arm)
        except ConfigError as exc:
            raise ConfigError(f"--harness: {exc}") from None
        loop = RunLoop(resolved, store, plugins=plugins, progress=progress, session_factory=session_factory)
        loop.start()
        out.append(loop.run())
    return out


def resume_run(cfg: RunConfig, store: Any, run_id: str, *, plugins: Optional[PluginManager] = None,
               progress: Any = None, harness: Optional[str] = None,
               session_factory: Callable[..., Any] = build_session) -> RunOutcome:
    started = next(iter(store.events(run_stream(run_id))), None)
    if started is None:
        raise RunError(f"run {run_id!r} not found in {store.url}")
    arm = (started.config.get("run") or {}).get("arm") or started.harness_mode
    if harness is not None and harness != arm:
        raise RunError(f"run {run_id!r} is the {arm!r} arm; --harness {harness} does not match (leave it out to resume)")
    loop = RunLoop(cfg.for_arm(arm), store, plugins=plugins, progress=progress, session_factory=session_factory)
    loop.resume(run_id)
    return loop.run()
