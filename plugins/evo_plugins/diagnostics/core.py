"""Domain-agnostic diagnostics: reward signal health, lengths, entropy, repetition, format."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Mapping

from evo_core.api import Window
from evo_core.harness.stats import slope

from .base import BaseDiagnostic, Measurement, halves, num, rate, signal, train_rollouts


class ZeroVarianceGroups(BaseDiagnostic):
    """GRPO groups whose rewards are *exactly* equal carry no advantage signal.

    Exact equality, not a std threshold: a group of [1.0, 1.0, 1.0] and one of
    [0.3, 0.3] are both dead; [1.0, 0.999] is not."""

    name, version, kinds = "zero_variance_groups", "1", ("zero_variance_groups",)
    default_params = {"max_fraction": 0.6, "min_groups": 4, "min_group_size": 2}

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
    default_params = {"max_rate": 0.2, "min_n": 16}

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
    default_params = {"max_ratio": 1.5, "min_each": 8}

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


class EntropyCollapse(BaseDiagnostic):
    """Mean token entropy (``signals.entropy``) falls below a floor or drops sharply."""

    name, version, kinds = "entropy_collapse", "1", ("entropy_collapse",)
    default_params = {"min_entropy": 0.05, "max_drop": 0.6, "min_n": 16}

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if num(signal(r, "entropy")) is not None]
        if len(rows) < p["min_n"]:
            return [Measurement(None, len(rows), False)]
        early, late = halves(rows)
        mean_late = sum(num(signal(r, "entropy")) for r in late) / len(late)
        mean_early = (sum(num(signal(r, "entropy")) for r in early) / len(early)) if early else None
        drop = (1 - mean_late / mean_early) if mean_early else None
        fired = mean_late < p["min_entropy"] or (drop is not None and drop > p["max_drop"])
        ev = tuple(r.event_id for r in sorted(late, key=lambda r: num(signal(r, "entropy"))))
        return [Measurement(mean_late, len(rows), fired, "warning", ev,
                            {"threshold": p["min_entropy"], "early": mean_early, "drop": drop, "max_drop": p["max_drop"]},
                            message=f"mean token entropy {mean_late:.3f}" + (f" (down {drop:.0%})" if drop else ""))]


_WORD = re.compile(r"\S+")


def max_ngram_repeats(text: str, n: int) -> int:
    toks = _WORD.findall(text)
    if len(toks) < n:
        return 0
    c = Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))
    return max(c.values())


def max_identical_tool_calls(calls: Any) -> int:
    if not isinstance(calls, (list, tuple)) or not calls:
        return 0
    return max(Counter(str(c) for c in calls).values())


class RepetitionLoops(BaseDiagnostic):
    """Degenerate loops: a repeated n-gram in the response, or the same tool call again and again."""

    name, version, kinds = "repetition_loops", "1", ("repetition_loop", "repeated_tool_calls")
    default_params = {"n": 4, "min_repeats": 3, "max_rate": 0.1, "max_identical_calls": 3, "min_n": 16}

    def measurements(self, window, p):
        rows = train_rollouts(window)
        loops = [r for r in rows if (num(signal(r, "max_ngram_repeats")) or max_ngram_repeats(r.response_preview, p["n"]))
                 >= p["min_repeats"]]
        tool_rows = [r for r in rows if signal(r, "tool_call_names", "tool_call_list") is not None]
        tool_loops = [r for r in tool_rows
                      if max_identical_tool_calls(signal(r, "tool_call_names", "tool_call_list")) >= p["max_identical_calls"]]
        v1 = len(loops) / len(rows) if rows else None
        v2 = len(tool_loops) / len(tool_rows) if tool_rows else None
        return [
            Measurement(v1, len(rows), v1 is not None and len(rows) >= p["min_n"] and v1 > p["max_rate"], "warning",
                        tuple(r.event_id for r in loops), {"threshold": p["max_rate"], "ngram": p["n"]},
                        kind="repetition_loop", message=f"{v1 or 0:.0%} of responses repeat a {p['n']}-gram"),
            Measurement(v2, len(tool_rows), v2 is not None and len(tool_rows) >= 1 and v2 > p["max_rate"], "warning",
                        tuple(r.event_id for r in tool_loops), {"threshold": p["max_rate"]},
                        kind="repeated_tool_calls", message=f"{v2 or 0:.0%} of episodes repeat an identical tool call"),
        ]


class FormatViolations(BaseDiagnostic):
    """Responses the domain marks as malformed (``signals.format_ok`` false)."""

    name, version, kinds = "format_violations", "1", ("format_violation",)
    default_params = {"max_rate": 0.2, "min_n": 16}

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if signal(r, "format_ok") is not None]
        bad = [r for r in rows if not signal(r, "format_ok")]
        v = len(bad) / len(rows) if rows else None
        fired = v is not None and len(rows) >= p["min_n"] and v > p["max_rate"]
        rewarded_bad = sum(1 for r in bad if r.reward)
        sev = "invalid" if bad and rewarded_bad / len(bad) > 0.5 else "warning"
        return [Measurement(v, len(rows), fired, sev, tuple(r.event_id for r in bad),
                            {"threshold": p["max_rate"], "rewarded_violations": rewarded_bad},
                            message=f"{v or 0:.0%} format violations ({rewarded_bad} still rewarded)")]


class AnswerHedging(BaseDiagnostic):
    """Several final answers in one response, paid by a lenient verifier.

    Fires when the hedge rate (``signals.answer_count > 1``) is above ``max_rate`` and rising,
    while strict accuracy on the audited rollouts is flat or falling. It is "invalid" when
    hedges are rewarded (the verifier pays for listing answers)."""

    name, version, kinds = "answer_hedging", "1", ("answer_hedging",)
    default_params = {"max_rate": 0.15, "min_rise": 0.0, "strict_tolerance": 0.02, "paid_fraction": 0.5, "min_n": 32}

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if num(signal(r, "answer_count")) is not None]
        if len(rows) < p["min_n"]:
            return [Measurement(None, len(rows), False)]
        hedged = lambda r: num(signal(r, "answer_count")) > 1  # noqa: E731
        early, late = halves(rows)
        v_late = rate(late, hedged)
        v_early = rate(early, hedged) if early else None
        rise = (v_late - v_early) if v_early is not None else None
        aud_e = [r for r in early if r.strict_correct is not None]
        aud_l = [r for r in late if r.strict_correct is not None]
        s_early = rate(aud_e, lambda r: r.strict_correct) if aud_e else None
        s_late = rate(aud_l, lambda r: r.strict_correct) if aud_l else None
        strict_not_up = s_early is None or s_late is None or s_late <= s_early + p["strict_tolerance"]
        hedges = [r for r in late if hedged(r)]
        paid = (sum(1 for r in hedges if r.reward and r.reward > 0) / len(hedges)) if hedges else 0.0
        fired = v_late > p["max_rate"] and (rise is None or rise >= p["min_rise"]) and strict_not_up
        sev = "invalid" if paid >= p["paid_fraction"] else "warning"
        return [Measurement(v_late, len(rows), fired, sev, tuple(r.event_id for r in hedges),
                            {"threshold": p["max_rate"], "early_rate": v_early, "rise": rise, "paid_fraction": paid,
                             "strict_early": s_early, "strict_late": s_late},
                            message=f"hedge rate {v_late:.0%} (was {v_early if v_early is not None else float('nan'):.0%}); "
                                    f"{paid:.0%} of hedges rewarded; strict {s_early} -> {s_late}")]


class RewardOracleGap(BaseDiagnostic):
    """Training reward vs the strict oracle on the audited sample: a widening gap means the
    reward pays for something the oracle rejects."""

    name, version, kinds = "reward_oracle_gap", "1", ("reward_oracle_gap",)
    default_params = {"max_gap": 0.15, "min_widen": 0.0, "min_audited": 16, "reward_threshold": 0.5}

    def measurements(self, window, p):
        rows = [r for r in train_rollouts(window) if r.strict_correct is not None and r.reward is not None]
        if len(rows) < p["min_audited"]:
            return [Measurement(None, len(rows), False)]
        paid = lambda r: r.reward >= p["reward_threshold"]  # noqa: E731
        gap = lambda rs: (sum(float(paid(r)) - float(bool(r.strict_correct)) for r in rs) / len(rs)) if rs else None  # noqa: E731
        early, late = halves(rows)
        g_late, g_early = gap(late), gap(early)
        widen = (g_late - g_early) if g_early is not None else None
        fired = g_late is not None and g_late > p["max_gap"] and (widen is None or widen >= p["min_widen"])
        bad = [r for r in late if paid(r) and not r.strict_correct]
        return [Measurement(g_late, len(rows), fired, "invalid", tuple(r.event_id for r in bad),
                            {"threshold": p["max_gap"], "early_gap": g_early, "widening": widen,
                             "rewarded_but_strict_wrong": len(bad)},
                            message=f"reward exceeds the strict oracle by {g_late or 0:.2f} on audited rollouts")]


class RewardHeldoutDivergence(BaseDiagnostic):
    """Training reward rising while held-out strict accuracy falls, by more than noise:
    over the last evals, the fitted held-out drop exceeds ``min_heldout_drop`` while the
    fitted training-reward change is at least ``min_reward_rise``."""

    name, version, kinds = "reward_heldout_divergence", "2", ("reward_heldout_divergence",)
    default_params = {"reward_metric": "reward_mean", "heldout_metric": "strict_accuracy", "min_evals": 4,
                      "max_evals": 8, "min_reward_rise": 0.0, "min_heldout_drop": 0.05}

    def measurements(self, window, p):
        evals = [e for e in window.evals if e.branch == "main" and e.split != "train"
                 and isinstance(e.metrics.get(p["heldout_metric"]), (int, float))][-p["max_evals"]:]
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


class ToolErrors(BaseDiagnostic):
    """Tool-call error rate, and tool avoidance (episodes that could use tools but make no call)."""

    name, version, kinds = "tool_errors", "1", ("tool_errors", "tool_avoidance")
    default_params = {"max_error_rate": 0.3, "max_avoidance": 0.8, "min_calls": 10, "min_episodes": 8}

    def measurements(self, window, p):
        # "tool_calls"/"tool_errors" are the generic names; evo-plugin-swe reports "n_tool_calls"/"tool_call_errors".
        rows = [r for r in train_rollouts(window) if num(signal(r, "tool_calls", "n_tool_calls")) is not None]
        calls = sum(num(signal(r, "tool_calls", "n_tool_calls")) for r in rows)
        errors = sum(num(signal(r, "tool_errors", "tool_call_errors", default=0)) or 0 for r in rows)
        er = errors / calls if calls else None
        avoid = [r for r in rows if num(signal(r, "tool_calls", "n_tool_calls")) == 0]
        ar = len(avoid) / len(rows) if rows else None
        err_rows = [r for r in rows if (num(signal(r, "tool_errors", default=0)) or 0) > 0]
        return [
            Measurement(er, int(calls), er is not None and calls >= p["min_calls"] and er > p["max_error_rate"], "warning",
                        tuple(r.event_id for r in err_rows), {"threshold": p["max_error_rate"], "calls": calls, "errors": errors},
                        kind="tool_errors", message=f"{er or 0:.0%} of tool calls fail"),
            Measurement(ar, len(rows), ar is not None and len(rows) >= p["min_episodes"] and ar > p["max_avoidance"],
                        "warning", tuple(r.event_id for r in avoid), {"threshold": p["max_avoidance"]},
                        kind="tool_avoidance", message=f"{ar or 0:.0%} of episodes make no tool call"),
        ]
