"""A small, real diagnostic for the replay tests: the share of rewarded rollouts that
list more than one number (what the simulated exploit's lenient verifier pays for). It
reads ``sim_count``, the count the simulated learner and the generated log both report."""

from __future__ import annotations

from evo_core.api import Finding
from evo_core.hookspecs import hookimpl


def _answers(r) -> int:
    return int(r.signals.get("sim_count") or 1)


class MultiRewarded:
    name = "multi_rewarded"
    version = "2"
    default_params = {"max_rate": 0.3, "min_n": 8}

    def evaluate(self, window, params):
        rows = [r for r in window.rollouts if r.reward is not None]
        if len(rows) < params["min_n"]:
            return []
        bad = [r for r in rows if r.reward >= 1 and _answers(r) > 1]
        rate = len(bad) / len(rows)
        if rate <= params["max_rate"]:
            return []
        return [Finding(kind="multi_answer_rewarded", severity="invalid", evidence=tuple(r.event_id for r in bad[:20]),
                        stats={"rate": rate, "n": len(rows)})]


class Exploding:
    name = "exploding"
    version = "1"
    default_params = {}

    def evaluate(self, window, params):
        raise RuntimeError("boom")


@hookimpl
def evo_register_diagnostics():
    return [MultiRewarded(), Exploding()]
