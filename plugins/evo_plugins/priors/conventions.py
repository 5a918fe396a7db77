"""Diagnostics that read signal names by convention (``format_ok``, tool-call counts), as the
shipped math, code and SWE domains report them. Priors: they know a domain's vocabulary."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evo_plugins.diagnostics.base import BaseDiagnostic, Measurement, num, signal, train_rollouts


class FormatViolations(BaseDiagnostic):
    """Responses the domain marks as malformed (``signals.format_ok`` false)."""

    name, version, kinds = "format_violations", "1", ("format_violation",)
    default_params = {"max_rate": 0.2, "min_n": 16}
    prior = True

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


def max_identical_tool_calls(calls: Any) -> int:
    if not isinstance(calls, (list, tuple)) or not calls:
        return 0
    return max(Counter(str(c) for c in calls).values())


class ToolErrors(BaseDiagnostic):
    """Tool-call error rate, tool avoidance (episodes that make no call) and loops of the same call."""

    name, version, kinds = "tool_errors", "2", ("tool_errors", "tool_avoidance", "repeated_tool_calls")
    default_params = {"max_error_rate": 0.3, "max_avoidance": 0.8, "min_calls": 10, "min_episodes": 8,
                      "max_identical_calls": 3, "max_loop_rate": 0.1}
    prior = True

    def measurements(self, window, p):
        # "tool_calls"/"tool_errors" are the generic names; evo-plugin-swe reports "n_tool_calls"/"tool_call_errors".
        rows = [r for r in train_rollouts(window) if num(signal(r, "tool_calls", "n_tool_calls")) is not None]
        calls = sum(num(signal(r, "tool_calls", "n_tool_calls")) for r in rows)
        errors = sum(num(signal(r, "tool_errors", "tool_call_errors", default=0)) or 0 for r in rows)
        er = errors / calls if calls else None
        avoid = [r for r in rows if num(signal(r, "tool_calls", "n_tool_calls")) == 0]
        ar = len(avoid) / len(rows) if rows else None
        err_rows = [r for r in rows if (num(signal(r, "tool_errors", "tool_call_errors", default=0)) or 0) > 0]
        listed = [r for r in train_rollouts(window) if signal(r, "tool_call_names", "tool_call_list") is not None]
        loops = [r for r in listed
                 if max_identical_tool_calls(signal(r, "tool_call_names", "tool_call_list")) >= p["max_identical_calls"]]
        lr = len(loops) / len(listed) if listed else None
        return [
            Measurement(er, int(calls), er is not None and calls >= p["min_calls"] and er > p["max_error_rate"], "warning",
                        tuple(r.event_id for r in err_rows), {"threshold": p["max_error_rate"], "calls": calls, "errors": errors},
                        kind="tool_errors", message=f"{er or 0:.0%} of tool calls fail"),
            Measurement(ar, len(rows), ar is not None and len(rows) >= p["min_episodes"] and ar > p["max_avoidance"],
                        "warning", tuple(r.event_id for r in avoid), {"threshold": p["max_avoidance"]},
                        kind="tool_avoidance", message=f"{ar or 0:.0%} of episodes make no tool call"),
            Measurement(lr, len(listed), lr is not None and lr > p["max_loop_rate"], "warning",
                        tuple(r.event_id for r in loops), {"threshold": p["max_loop_rate"]},
                        kind="repeated_tool_calls", message=f"{lr or 0:.0%} of episodes repeat an identical tool call"),
        ]
