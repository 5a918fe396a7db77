"""Domain-agnostic diagnostics: reward signal health, lengths, entropy, repetition, format,
and the reward's disagreement with the strict oracle in both directions (over- and underpayment)."""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from typing import Any, Mapping, Optional

from evo_core.api import Param, Window
from evo_core.api.stats import binomial_greater, paid_reward, slope

from .base import BaseDiagnostic, Measurement, halves, num, rate, train_rollouts


class ZeroVarianceGroups(BaseDiagnostic):
    """GRPO groups whose rewards are *exactly* equal carry no advantage signal.

    Exact equality, not a std threshold: a group of [1.0, 1.0, 1.0] and one of
    [0.3, 0.3] are both dead; [1.0, 0.999] is not."""

    name, version, kinds = "zero_variance_groups", "1", ("zero_variance_groups",)
    parameters = {"max_fraction": Param(0.6, min=0.0, max=1.0, doc="fire above this share of dead groups"),
                  "min_groups": Param(4, min=1, doc="groups needed before it can fire"),
                  "min_group_size": Param(2, min=2, doc="smaller groups are not counted")}

    def measurements(self, window: Window, p: Mapping[str, Any]) -> list[Measurement]:
        groups: dict[str, list] = defaultdict(list)
        for r in train_rollouts(window):
            if r.reward is not None:
                groups[r.group_id].append(r)
        groups = {g: rs for g, rs in groups.items() if len(rs) >= p["min_group_size"]}
        dead = [g for g, rs in groups.items() if len({r.reward for r in rs}) == 1]
        n = len(groups)
        value = len(dead) / n if n else None
        all_right = sum(1 for g in dead if groups[g][0].reward and groups[g][0].reward > 0)
        fired = value is not None and n >= p["min_groups"] and value > p["max_fraction"]
        ev = tuple(r.event_id for g in dead[:10] for r in groups[g])
        return [Measurement(value, n, fired, "warning", ev,
                            {"threshold": p["max_fraction"], "dead_groups": len(dead), "all_rewarded": all_right,
                             "all_zero": len(dead) - all_right},
                            message=f"{len(dead)}/{n} groups have identical rewards (no advantage signal)")]


class TruncationRate(BaseDiagnostic):
    """Share of rollouts cut off at the length limit."""

    name, version, kinds = "truncation_rate", "1", ("truncation",)
    parameters = {"max_rate": Param(0.2, min=0.0, max=1.0, doc="fire above this share of truncated rollouts"),
                  "min_n": Param(16, min=1, doc="rollouts needed before it can fire")}

    def measurements(self, window, p):
        rows = train_rollouts(window)
        value = rate(rows, lambda r: r.truncated)
        fired = value is not None and len(rows) >= p["min_n"] and value > p["max_rate"]
        ev = tuple(r.event_id for r in rows if r.truncated)
        return [Measurement(value, len(rows), fired, "warning", ev, {"threshold": p["max_rate"]},
                            message=f"{value or 0:.0%} of rollouts hit the length limit")]


class LengthInflation(BaseDiagnostic):
    """Wrong answers much longer than right ones: the policy pads instead of solving."""

    name, version, kinds = "length_inflation", "1", ("length_inflation",)
    parameters = {"max_ratio": Param(1.5, min=0.0, doc="fire when wrong answers are this many times as long"),
                  "min_each": Param(8, min=1, doc="right and wrong rollouts needed each")}

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if r.correct is not None and r.length > 0]
        wrong = [r for r in rows if not r.correct]
        right = [r for r in rows if r.correct]
        if len(wrong) < p["min_each"] or len(right) < p["min_each"]:
            return [Measurement(None, min(len(wrong), len(right)), False)]
        lw = sum(r.length for r in wrong) / len(wrong)
        lr = sum(r.length for r in right) / len(right)
        ratio = lw / lr if lr else None
        fired = ratio is not None and ratio > p["max_ratio"]
        ev = tuple(r.event_id for r in sorted(wrong, key=lambda r: -r.length))
        return [Measurement(ratio, min(len(wrong), len(right)), fired, "warning", ev,
                            {"threshold": p["max_ratio"], "mean_len_wrong": lw, "mean_len_right": lr},
                            message=f"wrong answers are {ratio or 0:.2f}x as long as right ones")]


def _entropy(r: Any) -> Optional[float]:
    return num((r.train or {}).get("entropy"))


class EntropyCollapse(BaseDiagnostic):
    """Mean token entropy (the trainer's ``train.entropy``) falls below a floor or drops sharply."""

    name, version, kinds = "entropy_collapse", "1", ("entropy_collapse",)
    parameters = {"min_entropy": Param(0.05, min=0.0, doc="fire below this mean token entropy"),
                  "max_drop": Param(0.6, min=0.0, max=1.0, doc="or when it fell by this fraction"),
                  "min_n": Param(16, min=1, doc="rollouts needed before it can fire")}

    def measurements(self, window, p):
        pairs = [(r, e) for r in train_rollouts(window) for e in [_entropy(r)] if e is not None]
        rows = [r for r, _ in pairs]
        ent = {r.event_id: e for r, e in pairs}
        if len(rows) < p["min_n"]:
            return [Measurement(None, len(rows), False)]
        early, late = halves(rows)
        mean_late = sum(ent[r.event_id] for r in late) / len(late)
        mean_early = (sum(ent[r.event_id] for r in early) / len(early)) if early else None
        drop = (1 - mean_late / mean_early) if mean_early else None
        fired = mean_late < p["min_entropy"] or (drop is not None and drop > p["max_drop"])
        ev = tuple(r.event_id for r in sorted(late, key=lambda r: ent[r.event_id])) if fired else ()
        return [Measurement(mean_late, len(rows), fired, "warning", ev,
                            {"threshold": p["min_entropy"], "early": mean_early, "drop": drop, "max_drop": p["max_drop"]},
                            message=f"mean token entropy {mean_late:.3f}" + (f" (down {drop:.0%})" if drop else ""))]


_WORD = re.compile(r"\S+")


@functools.lru_cache(maxsize=16384)  # pure; a rollout stays in the window for several passes
def max_ngram_repeats(text: str, n: int) -> int:
    toks = _WORD.findall(text)
    if len(toks) < n:
        return 0
    c = Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))
    return max(c.values())


class RepetitionLoops(BaseDiagnostic):
    """Degenerate loops: a word trigram repeated ``min_repeats`` times in a response."""

    name, version, kinds = "repetition_loops", "2", ("repetition_loop",)
    parameters = {"n": Param(3, min=1, doc="n-gram length"),
                  "min_repeats": Param(3, min=2, doc="repeats of one n-gram that make a loop"),
                  "max_rate": Param(0.1, min=0.0, max=1.0, doc="fire above this share of looping rollouts"),
                  "min_n": Param(16, min=1, doc="rollouts needed before it can fire")}

    def measurements(self, window, p):
        rows = train_rollouts(window)

        def repeats(r: Any) -> int:
            logged = (r.features or {}).get("repeated_trigrams") if p["n"] == 3 else None
            return int(logged) if isinstance(logged, (int, float)) else max_ngram_repeats(r.response_preview, p["n"])

        loops = [r for r in rows if repeats(r) >= p["min_repeats"]]
        v = len(loops) / len(rows) if rows else None
        return [Measurement(v, len(rows), v is not None and len(rows) >= p["min_n"] and v > p["max_rate"], "warning",
                            tuple(r.event_id for r in loops), {"threshold": p["max_rate"], "ngram": p["n"]},
                            message=f"{v or 0:.0%} of responses repeat a {p['n']}-gram")]


class RewardOracleGap(BaseDiagnostic):
    """The training reward pays rollouts the strict oracle rejects (overpayment).

    On the audited sample, among the rollouts training *paid* (their reward after
    interventions, ``reward_final``), the share the oracle rejects. A reward that pays for
    something the oracle does not value is invalid evidence however high it scores; with a
    sound verifier the share is zero. Fires when the share exceeds ``max_overpay`` with at
    least ``min_overpaid`` such rollouts. ``p_value`` is the one-sided binomial test of the
    share against ``max_overpay`` (reported, not gating: the firing rule is unchanged)."""

    name, version, kinds = "reward_oracle_gap", "2", ("reward_oracle_gap",)
    parameters = {"max_overpay": Param(0.05, min=0.0, max=1.0, doc="fire above this share of paid, rejected rollouts"),
                  "min_overpaid": Param(6, min=1, doc="overpaid rollouts needed before it can fire"),
                  "pay_threshold": Param(0.0, doc="a reward above this counts as paid")}

    def measurements(self, window, p):
        return [_wrong_side(window, p, "paid", p["max_overpay"], p["min_overpaid"])]


class RewardOracleUnderpay(BaseDiagnostic):
    """The training reward withholds pay from rollouts the strict oracle accepts (underpayment).

    The mirror of ``reward_oracle_gap``: on the audited sample, among the rollouts training
    did *not* pay, the share the oracle accepts. A verifier that rejects correct work in a
    form it does not parse, or against a wrong key, teaches the policy to avoid correct
    answers. Fires when the share exceeds ``max_underpay`` with at least ``min_underpaid``
    such rollouts; the same statistics and validity treatment as the overpaid side."""

    name, version, kinds = "reward_oracle_underpay", "1", ("reward_oracle_underpay",)
    parameters = {"max_underpay": Param(0.05, min=0.0, max=1.0, doc="fire above this share of unpaid, accepted rollouts"),
                  "min_underpaid": Param(6, min=1, doc="underpaid rollouts needed before it can fire"),
                  "pay_threshold": Param(0.0, doc="a reward above this counts as paid")}

    def measurements(self, window, p):
        return [_wrong_side(window, p, "unpaid", p["max_underpay"], p["min_underpaid"])]


def _wrong_side(window: Window, p: Mapping[str, Any], side: str, tolerance: float, min_wrong: int) -> Measurement:
    """The share of one side's audited rollouts the oracle disagrees with (paid: rejected;
    unpaid: accepted), with its evidence and a one-sided binomial p-value against ``tolerance``."""
    rows = [r for r in train_rollouts(window) if r.strict_correct is not None and paid_reward(r) is not None]
    paid = [r for r in rows if paid_reward(r) > p["pay_threshold"]]
    on_side = paid if side == "paid" else [r for r in rows if paid_reward(r) <= p["pay_threshold"]]
    wrong = [r for r in on_side if (not r.strict_correct) == (side == "paid")]
    share = len(wrong) / len(on_side) if on_side else None
    fired = share is not None and len(wrong) >= min_wrong and share > tolerance
    what = ("overpaid", "rejects", "paid") if side == "paid" else ("underpaid", "accepts", "unpaid")
    stats = {"threshold": tolerance, what[0]: len(wrong), f"{what[2]}_audited": len(on_side), "audited": len(rows),
             "side": side, "p_value": binomial_greater(len(wrong), len(on_side), tolerance)}
    return Measurement(share, len(on_side), fired, "invalid", tuple(r.event_id for r in wrong), stats,
                       message=f"the oracle {what[1]} {len(wrong)} of {len(on_side)} {what[2]} audited rollouts")


class RewardHeldoutDivergence(BaseDiagnostic):
    """Training reward rising while held-out strict accuracy falls, by more than noise:
    over the last evals, the fitted held-out drop exceeds ``min_heldout_drop`` while the
    fitted training-reward change is at least ``min_reward_rise``."""

    name, version, kinds = "reward_heldout_divergence", "2", ("reward_heldout_divergence",)
    default_params = {"reward_metric": "reward_mean", "heldout_metric": "strict_accuracy", "min_evals": 4,
                      "max_evals": 8, "min_reward_rise": 0.0, "min_heldout_drop": 0.05}

    def measurements(self, window, p):
        evals = []  # the last max_evals, read from the end: window.evals holds the whole run's
        for e in reversed(window.evals):
            if len(evals) >= p["max_evals"]:
                break
            if e.branch == "main" and e.split != "train" and isinstance(e.metrics.get(p["heldout_metric"]), (int, float)):
                evals.append(e)
        evals.reverse()
        steps = [s for s in window.steps if isinstance(s.metrics.get(p["reward_metric"]), (int, float))]
        if len(evals) < p["min_evals"] or len(steps) < 3:
            return [Measurement(None, len(evals), False)]
        first = evals[0].step
        steps = [s for s in steps if s.step >= first] or steps
        rs = slope([float(s.step) for s in steps], [float(s.metrics[p["reward_metric"]]) for s in steps])
        hs = slope([float(e.step) for e in evals], [float(e.metrics[p["heldout_metric"]]) for e in evals])
        span = float(evals[-1].step - evals[0].step) or 1.0
        rise = rs * span if rs is not None else None
        drop = -hs * span if hs is not None else None
        fired = rise is not None and drop is not None and rise >= p["min_reward_rise"] and drop > p["min_heldout_drop"]
        return [Measurement(drop, len(evals), fired, "invalid", tuple(e.event_id for e in evals),
                            {"reward_change": rise, "heldout_drop": drop, "threshold": p["min_heldout_drop"], "span_steps": span},
                            message=f"over {span:.0f} steps: train reward {rise or 0:+.3f}, held-out strict {-(drop or 0):+.3f}")]


