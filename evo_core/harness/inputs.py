"""What a harness pass is given: the run's installed plugins (``Catalog``) and one step's
input (``PassInput``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from evo_core.harness.emit import ENGINE_VERSION
from evo_core.harness.ports import NO_TRAINER, HarnessPort
from evo_core.harness.window import EvidenceWindow
from evo_core.state import HarnessState
from evo_events import EvalCompleted


@attrs.frozen
class Catalog:
    """The installed plugins a run can use, resolved once per run, by name."""

    diagnostics: Mapping[str, Any] = attrs.Factory(dict)
    interventions: Mapping[str, Any] = attrs.Factory(dict)
    proposers: Mapping[str, Any] = attrs.Factory(dict)
    backtesters: Mapping[str, Any] = attrs.Factory(dict)
    gates: Mapping[str, Any] = attrs.Factory(dict)

    @classmethod
    def from_plugins(cls, pm: Any) -> "Catalog":
        return cls(pm.diagnostics(), pm.interventions(), pm.proposers(), pm.backtesters(), pm.gates())

    def versions(self) -> dict[str, str]:
        """The engine's and every plugin's version, as each decision records them."""
        out = {"harness_engine": ENGINE_VERSION}
        for prefix, cat in (("diagnostic", self.diagnostics), ("intervention", self.interventions),
                            ("proposer", self.proposers), ("backtester", self.backtesters), ("gate", self.gates)):
            for n, obj in cat.items():
                out[f"{prefix}:{n}"] = str(getattr(obj, "version", "?"))
        return out


@attrs.define
class PassInput:
    step: int
    state: HarnessState  # the fold after this step's trainer events
    evidence: EvidenceWindow  # with this step's rollouts and evals added
    evals: Sequence[EvalCompleted] = ()  # this step's evaluations (only validation ones are read)
    port: HarnessPort = NO_TRAINER  # online backtests and main-line snapshots
    final: bool = False
    seed: int = 0


__all__ = ["Catalog", "PassInput"]
