"""What a counterfactual replay found, as data (``render_replay`` draws it, ``--json`` prints it)."""

from __future__ import annotations

from typing import Any, Optional

import attrs

from evo_events import Event, FailureDiagnosed

from evo_core.audit.spec import ReplaySpec


@attrs.frozen
class CFinding:
    step: int
    kind: str
    severity: str
    diagnostic: str
    n_evidence: int
    value: Any = None

    @classmethod
    def of(cls, d: FailureDiagnosed) -> "CFinding":
        st = dict(d.stats or {})
        return cls(d.step, d.kind, d.severity, d.diagnostic, len(d.evidence), st.get("value", st.get("rate")))

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class ReplayedPass:
    """One step's harness work: what the replayed engine emitted, and what the run logged."""

    step: int
    replayed: list[Event]
    recorded: list[Event] = attrs.Factory(list)


@attrs.frozen
class ReplayResult:
    run_id: str
    replay_id: str
    stream: Optional[str]
    spec: ReplaySpec
    plugin_versions: dict[str, str]
    window_steps: int
    every: int
    passes: int  # diagnostic passes the replayed engine ran
    events_scanned: int
    findings: list[CFinding]
    appeared: list[dict[str, Any]]
    vanished: list[dict[str, Any]]
    flips: list[dict[str, Any]]
    bad_promotions: list[dict[str, Any]] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    divergences: list[dict[str, Any]] = attrs.Factory(list)  # passes whose events differ from the log's
    decisions: dict[str, int] = attrs.Factory(dict)  # recorded / replayed decision counts
    timings: dict[str, float] = attrs.Factory(dict)  # total_s, and engine_s inside the harness's passes
    find_bad: bool = False
    pass_events: list[ReplayedPass] = attrs.field(factory=list, repr=False)  # every pass, both sides

    @property
    def reproduced(self) -> bool:
        """Every pass emitted the recorded events (apart from event ids)."""
        return not self.divergences

    def summary(self) -> dict[str, Any]:
        out = {"passes": self.passes, "events_scanned": self.events_scanned, "findings": len(self.findings),
               "appeared": len(self.appeared), "vanished": len(self.vanished), "flips": len(self.flips),
               "plugin_failures": len(self.failures), "divergent_passes": len(self.divergences), **self.decisions}
        if self.bad_promotions:
            out["bad_promotions"] = len(self.bad_promotions)
            out["caught"] = sum(1 for b in self.bad_promotions if b["blocked"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "replay_id": self.replay_id, "stream": self.stream, "spec": self.spec.to_dict(),
                "plugin_versions": self.plugin_versions, "window_steps": self.window_steps, "every": self.every,
                "find_bad": self.find_bad, "summary": self.summary(), "reproduced": self.reproduced, "appeared": self.appeared,
                "vanished": self.vanished, "flips": self.flips, "bad_promotions": self.bad_promotions,
                "divergences": self.divergences, "failures": self.failures, "notes": self.notes,
                "timings": self.timings}
