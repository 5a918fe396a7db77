"""The leader/follower command channel without a process group: the leader's session proxy
broadcasts every state change, a follower thread replays it on its replica (fast)."""

from __future__ import annotations

import gc
import queue
import threading
from typing import Any

from evo_core.trainer.spmd import Leader, follow


class QueueComm:
    """Rank 0 puts, rank 1 gets: what ``Comm.broadcast`` does over a process group."""

    def __init__(self, rank: int, q: "queue.Queue[Any]") -> None:
        self.rank, self.world_size, self.q = rank, 2, q

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def broadcast(self, obj: Any = None) -> Any:
        if self.leader:
            self.q.put(obj)
            return obj
        return self.q.get(timeout=10)


class FakeSession:
    def __init__(self, log: list, name: str = "main") -> None:
        self.log, self.name, self.id_salt, self.engine, self.dist = log, name, "", object(), None

    def rl_step(self, state: Any = None) -> str:
        self.log.append((self.name, "step", state, self.id_salt))
        return "result"

    def fork(self, seed: Any = None) -> "FakeSession":
        self.log.append((self.name, "fork", seed))
        new = FakeSession(self.log, f"{self.name}/fork-{seed}")
        new.id_salt = self.id_salt  # as RLSession.fork's copy does
        return new

    def load_weights_bytes(self, data: bytes) -> None:
        self.log.append((self.name, "load_weights", data))

    def restore(self, data: bytes, version: int) -> None:
        self.log.append((self.name, "restore", data, version))

    def load_resume_state(self, d: Any) -> None:
        self.log.append((self.name, "load_resume", d))

    def resume_state(self) -> dict:
        return {"weights": "w0"}


def test_follower_replays_the_leaders_session_operations():
    q: "queue.Queue[Any]" = queue.Queue()
    leader_log: list = []
    follower_log: list = []
    follower_sessions: list = []

    def build_follower(cfg, plugins, **kw):
        assert kw == {"sft": False}  # the follower never trains its own SFT start
        s = FakeSession(follower_log)
        follower_sessions.append(s)
        return s, {}

    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("rc", follow(QueueComm(1, q), build_follower, None)))
    t.start()
    leader = Leader(QueueComm(0, q))
    session, _ = leader.factory(lambda cfg, plugins, **kw: (FakeSession(leader_log), {"sft": 1}))("cfg", None)
    session.id_salt = "run-1"
    assert session.rl_step({"interventions": 1}) == "result"
    branch = session.fork(7)
    branch.load_weights_bytes(b"snap")
    branch.rl_step("s")
    del branch
    gc.collect()
    assert leader._dropped  # the branch's replica is freed with the next command
    session.restore(b"main", 3)
    session.load_resume_state({"step": 2})
    leader.send("exit", 0)
    t.join(timeout=10)
    assert out["rc"] == 0
    assert follower_log[0] == ("main", "load_resume", {"weights": "w0"})  # the leader's start, SFT included
    assert follower_log[1:] == leader_log
    assert ("main", "step", {"interventions": 1}, "run-1") in follower_log
    assert ("main/fork-7", "step", "s", "run-1") in follower_log
    assert follower_sessions[0].dist is not None and follower_sessions[0].engine is not None


def test_a_follower_steps_with_the_leaders_oracle_budget():
    """Followers never evaluate, so the leader's validation labels are not theirs: each step
    carries the leader's spent count, and the audit shrinks alike on every rank."""
    from evo_core.trainer.oracle import LabelCounts

    q: "queue.Queue[Any]" = queue.Queue()
    seen: list = []

    class Budgeted(FakeSession):
        def __init__(self, log: list) -> None:
            super().__init__(log)
            self.oracle = type("Client", (), {"counts": LabelCounts(limit=100)})()

        def rl_step(self, state: Any = None) -> str:
            seen.append(self.oracle.counts.left())
            self.oracle.counts.add("main", "audit", 5)  # every rank audits alike
            return "result"

    follower: list = []
    t = threading.Thread(target=lambda: follow(QueueComm(1, q), lambda cfg, plugins, **kw: (follower.append(Budgeted([]))
                                                                                             or (follower[-1], {})), None))
    t.start()
    leader = Leader(QueueComm(0, q))
    session, _ = leader.factory(lambda cfg, plugins, **kw: (Budgeted([]), {}))("cfg", None)
    session.oracle.counts.add("main", "validation", 30)  # the leader's evaluation
    session.rl_step("s")
    leader.send("exit", 0)
    t.join(timeout=10)
    assert seen == [70, 70] and follower[0].oracle.counts.left() == session.oracle.counts.left() == 65
