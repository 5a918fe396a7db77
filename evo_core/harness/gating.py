"""One way to call gates and read their verdict, live and in replay.

Every configured gate that judges the candidate's subject decides (isolated: a gate that
raises, or is configured but not installed, counts as a veto). Abstentions do not count.
The candidate passes when at least one gate decided, none vetoed and none failed."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Candidate, GateContext, GateDecision
from evo_core.harness.isolation import Isolation


@attrs.frozen
class Verdict:
    accepted: bool
    vetoed: bool
    gate_names: str
    reasons: tuple[str, ...]
    decisions: tuple[GateDecision, ...]


def run_gates(gates: Mapping[str, Any], configured: Mapping[str, Mapping[str, Any]], cand: Candidate,
              gctx: GateContext, iso: Optional[Isolation]) -> list[GateDecision]:
    decisions = []
    for name, params in configured.items():
        params = dict(params)
        if params.pop("enabled", True) is False:
            continue
        gate = gates.get(name)
        if gate is None:
            decisions.append(GateDecision(gate=name, passed=False, veto=True,
                                          reasons=(f"gate {name!r} is configured but not installed",)))
            continue
        if cand.subject not in tuple(getattr(gate, "subjects", ("intervention", "policy"))):
            continue
        if iso is None:
            d = gate.decide(cand, gctx, params)
        else:
            d = None
            with iso.guard(name, "decide") as g:
                d = gate.decide(cand, gctx, params)
            if g.failed or d is None:
                d = GateDecision(gate=name, passed=False, veto=True, reasons=(f"gate {name} raised",))
        decisions.append(d)
    return decisions


def verdict(decisions: Sequence[GateDecision]) -> Verdict:
    real = [d for d in decisions if not d.abstain]
    vetoes = [d for d in real if d.veto]
    failed = [d for d in real if not d.passed]
    accepted = bool(real) and not vetoes and not failed
    if accepted:
        reasons = tuple(r for d in real for r in d.reasons)
    elif not real:
        reasons = ("no gate decided on this candidate",)
    else:
        reasons = tuple(f"{d.gate}: {r}" for d in vetoes + [d for d in failed if d not in vetoes]
                        for r in (d.reasons or ("failed",)))
    return Verdict(accepted, bool(vetoes), "+".join(d.gate for d in real) or "none", reasons, tuple(decisions))


def gate_figures(decisions: Sequence[GateDecision]) -> dict[str, Any]:
    from evo_core.harness.emit import jsonable

    return {d.gate: {"passed": d.passed, "veto": d.veto, "reasons": list(d.reasons),
                     "figures": jsonable(dict(d.figures)), "version": d.version} for d in decisions}
