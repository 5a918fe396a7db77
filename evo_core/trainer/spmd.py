"""Leader and followers: how the ranks of a launched ``evo run`` stay in step.

Rank 0 (the leader) runs the ordinary run loop: it alone opens the event store, runs the
harness, evaluates, writes checkpoints, sinks and progress. Its session is wrapped in a
:class:`LeaderSession`: every operation that changes training state (an RL step with the
harness state it sees, a fork for a backtest branch, loading weights into a branch, a
restore, loading a resume checkpoint, the rollout id salt) is first broadcast as a command,
and every other rank (a follower, :func:`follow`) applies it to its own replica of that
session. Inside the RL step the ranks then split sampling and the update between them
(``evo_core.trainer.shard``). Online A/B backtests (control and treatment forked from the
same state) therefore train on all ranks too, and the harness itself is untouched.

Under DeepSpeed ZeRO (``[distributed] engine = "deepspeed"``) the replicas hold shards of the
optimizer state, so a snapshot with the optimizer (rank 0 gathers every shard) and a resume
checkpoint (every rank writes its own shard) are commands too.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

from evo_core.trainer.ranks import as_rank_lost, lost_peer

Factory = Callable[..., tuple[Any, dict[str, Any]]]


def _zero_settings(cfg: Any) -> Any:
    """The ZeRO settings of ``cfg`` when its engine is DeepSpeed, else None."""
    from evo_core.trainer.dist_settings import DistributedSettings

    settings = DistributedSettings.from_mapping(getattr(cfg, "distributed", None))
    return settings.deepspeed_settings() if settings.engine == "deepspeed" else None


def _start(session: Any, cfg: Any) -> None:
    """What every rank does to a new session once its state is in place: join ZeRO (a collective)."""
    zero = _zero_settings(cfg)
    if zero is not None:
        session.enable_zero(zero)


def _budget_spent(session: Any) -> Optional[int]:
    """The capped oracle labels the session's run has spent, when it has a budget (else None)."""
    counts = getattr(getattr(session, "oracle", None), "counts", None)
    return counts.spent() if counts is not None and getattr(counts, "limit", None) is not None else None


class Leader:
    """Rank 0's side of the command channel."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self._next = 0
        self._dropped: list[int] = []  # branches the leader let go of: the followers free theirs too
        # set while the leader carries out a command the followers also run: an exception that
        # escapes it leaves them inside a collective, where an "exit" command must not follow
        self.busy = False

    def new_sid(self) -> int:
        self._next += 1
        return self._next

    def drop(self, sid: int, inner: Any = None) -> None:
        self._dropped.append(sid)
        close = getattr(inner, "close", None)
        if callable(close):
            close()

    def send(self, op: str, *args: Any) -> None:
        dropped, self._dropped = self._dropped, []
        try:
            self.comm.broadcast((dropped, op, args))
        except Exception as exc:
            raise (as_rank_lost(exc) if lost_peer(exc) else exc) from exc

    def run(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Broadcast ``op`` with ``args`` (the session id first), then do it here too. A
        collective that fails for want of a peer becomes ``RankLost``."""
        self.send(op, *args)
        self.busy = True
        try:
            out = fn()
        except Exception as exc:
            if lost_peer(exc):
                raise as_rank_lost(exc) from exc
            raise
        self.busy = False
        return out

    def factory(self, build: Factory) -> Factory:
        """A session factory for ``RunLoop``: the leader builds (with the SFT warm start), then
        hands every follower the resulting training state, so all replicas start identical."""

        def make(cfg: Any, plugins: Any, **kw: Any) -> tuple[Any, dict[str, Any]]:
            session, info = build(cfg, plugins, **kw)
            session.dist = self.comm
            sid = self.new_sid()
            self.send("new", sid, cfg, session.resume_state())
            _start(session, cfg)
            return LeaderSession(session, self, sid), info

        return make


class LeaderSession:
    """The leader's session: reads go straight to it; state changes are broadcast first."""

    def __init__(self, inner: Any, leader: Leader, sid: int) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_leader", leader)
        object.__setattr__(self, "_sid", sid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # rollout ids derive from id_salt: every rank must name rollouts alike; checkpoint_dir is
        # where every rank writes its ZeRO optimizer shard of a resume checkpoint
        if name in ("id_salt", "checkpoint_dir"):
            self._leader.send("set", self._sid, name, value)
        setattr(self._inner, name, value)

    @property
    def _sharded(self) -> bool:
        return getattr(self._inner, "zero", None) is not None

    def weights_bytes(self, *, with_optimizer: bool = True) -> bytes:
        if with_optimizer and self._sharded:  # rank 0 gathers every rank's optimizer shard
            return self._leader.run("shards", lambda: self._inner.weights_bytes(with_optimizer=True), self._sid)
        return self._inner.weights_bytes(with_optimizer=with_optimizer)

    def resume_state(self) -> Any:
        if self._sharded:  # every rank writes its optimizer shard of this checkpoint
            return self._leader.run("resume_state", self._inner.resume_state, self._sid)
        return self._inner.resume_state()

    def rl_step(self, state: Any = None) -> Any:
        # followers never evaluate: the oracle budget they step with is the leader's, so the
        # audit and the re-grades shrink alike on every rank
        return self._leader.run("step", lambda: self._inner.rl_step(state), self._sid, state, _budget_spent(self._inner))

    def fork(self, seed: Optional[int] = None) -> "LeaderSession":
        sid = self._leader.new_sid()
        inner = self._leader.run("fork", lambda: self._inner.fork(seed), self._sid, sid, seed)
        branch = LeaderSession(inner, self._leader, sid)
        weakref.finalize(branch, self._leader.drop, sid, inner)
        return branch

    def load_weights_bytes(self, data: bytes) -> None:
        self._leader.run("load_weights", lambda: self._inner.load_weights_bytes(data), self._sid, data)

    def restore(self, data: bytes, policy_version: int) -> None:
        self._leader.run("restore", lambda: self._inner.restore(data, policy_version), self._sid, data, policy_version)

    def load_resume_state(self, d: Any) -> None:
        self._leader.run("load_resume", lambda: self._inner.load_resume_state(d), self._sid, d)


def follow(comm: Any, build: Factory, plugins: Any) -> int:
    """A follower rank: apply the leader's commands until it says ``exit``; returns the exit
    code the leader sent. Followers never open the store and never evaluate."""
    sessions: dict[int, Any] = {}
    while True:
        dropped, op, args = comm.broadcast(None)
        for sid in dropped:
            gone = sessions.pop(sid, None)
            if gone is not None and callable(getattr(gone, "close", None)):
                gone.close()
        if op == "exit":
            return int(args[0])
        if op == "new":
            sid, cfg, state = args
            session, _ = build(cfg, plugins, sft=False)  # the weights come from the leader, SFT included
            session.dist = comm
            session.engine = _LeaderSyncs(session.engine)
            session.load_resume_state(state)
            _start(session, cfg)
            sessions = {sid: session}
        elif op == "step":
            if len(args) > 2 and args[2] is not None:
                sessions[args[0]].oracle.counts.sync(args[2])
            sessions[args[0]].rl_step(args[1])
        elif op == "fork":
            sessions[args[1]] = sessions[args[0]].fork(args[2])
        elif op == "set":
            setattr(sessions[args[0]], args[1], args[2])
        elif op == "load_weights":
            sessions[args[0]].load_weights_bytes(args[1])
        elif op == "restore":
            sessions[args[0]].restore(args[1], args[2])
        elif op == "load_resume":
            sessions[args[0]].load_resume_state(args[1])
        elif op == "shards":  # rank 0 snapshots with the optimizer: send it this rank's shard
            sessions[args[0]].optimizer_shards()
        elif op == "resume_state":  # rank 0 writes a resume checkpoint: write this rank's shard
            sessions[args[0]].resume_state()
        else:
            raise RuntimeError(f"rank {comm.rank}: unknown command {op!r} from rank 0")


class _LeaderSyncs:
    """A follower's rollout engine: it samples as usual, but leaves the weight sync to a shared
    rollout server (``[rollout]``) to rank 0, which pushes the very same weights before it
    sends the next command."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def generate(self, *args: Any, **kw: Any) -> Any:
        return self.engine.generate(*args, **kw)

    def sync_weights(self, policy: Any, version: int) -> None:
        if hasattr(self.engine, "policy"):  # in process: sample from the live weights, nothing to push
            self.engine.sync_weights(policy, version)
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)
