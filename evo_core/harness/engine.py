"""The harness engine: evidence → diagnoses → proposals → backtests → gates → decisions.

One engine per run, with no memory of its own: everything it knows between steps is the
fold of the log (``HarnessState``) and the evidence window (also a fold). It holds what a
run's passes share (the config with its priors, the diagnostics, the plugin versions) and
makes each step's pass; the loop runs ``engine.new_pass(inp).run()`` once per step, *before*
the step is committed (the engine is not on the pass's call path); the pass returns its events, and
the loop appends the step's events and the pass's in one batch. So a step and its harness
work are durable together or not at all: a crash anywhere in a pass is recovered by
recomputing the step from its checkpoint, and the pass again, deterministically.

The pass itself is ``evo_core.harness.harness_pass.HarnessPass``. Replay runs the same
pass over recorded evidence (``evo_core.audit.replay``), with a port that answers from the
recorded run where the live loop's port forks the session.
"""

from __future__ import annotations


import attrs
import structlog

from evo_core.harness.config import HarnessConfig
from evo_core.harness.diagnosis import Diagnoses
from evo_core.harness.emit import ENGINE, ENGINE_VERSION
from evo_core.harness.harness_pass import HarnessPass
from evo_core.harness.inputs import Catalog, PassInput

log = structlog.get_logger("evo.harness")

__all__ = ["HarnessEngine", "Catalog", "PassInput", "HarnessPass", "ENGINE", "ENGINE_VERSION", "with_priors"]


class HarnessEngine:
    def __init__(self, config: HarnessConfig, catalog: Catalog, *, run_id: str) -> None:
        self.config = with_priors(config, catalog)
        self.catalog = catalog
        self.run_id = run_id
        self.diagnoses = Diagnoses(self.config.diagnostics, catalog.diagnostics)
        self.versions = catalog.versions()

    def new_pass(self, inp: PassInput) -> HarnessPass:
        """The pass of one step (``.run()`` returns its events)."""
        return HarnessPass(self.config, self.catalog, self.diagnoses, self.versions, self.run_id, inp)


def with_priors(config: HarnessConfig, catalog: Catalog) -> HarnessConfig:
    """Cold (the default) runs only what the config names and the generic defaults; warm
    (``priors = true``) adds every installed diagnostic and proposer marked ``prior``: the
    flaw- and domain-specific knowledge written by hand."""
    if not config.priors:
        return config
    diagnostics = dict(config.diagnostics)
    proposers = dict(config.proposers)
    for name, d in catalog.diagnostics.items():
        if getattr(d, "prior", False):
            diagnostics.setdefault(name, {})
    for name, pr in catalog.proposers.items():
        if getattr(pr, "prior", False):
            proposers.setdefault(name, {})
    return attrs.evolve(config, diagnostics=diagnostics, proposers=proposers)
