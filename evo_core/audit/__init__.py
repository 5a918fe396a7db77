"""Audit, counterfactual replay and tail: explain a training decision after the fact.

- ``audit_run(store, run_id, decision_id=None)``: the evidence chain behind promotions,
  with the hash chain of everything shown verified, and whether each prediction held.
- ``replay(store, run_id, spec, pm, find_bad=False)``: the harness engine again over the
  recorded evidence, with other diagnostics/gates (none: a reproduction check); results go
  to their own ``replay-<run>-<id>`` stream.
- ``tail(store, run_id, console)``: follow a live run.
"""

from evo_core.audit.chain import AuditChain, AuditReport, Verification, audit_run, build_chain
from evo_core.audit.errors import AuditError
from evo_core.audit.events import ReplayCompleted, replay_stream
from evo_core.audit.index import RunIndex
from evo_core.audit.replay import CounterfactualReplay, ReplayResult, replay
from evo_core.audit.spec import ReplaySpec, parse_spec
from evo_core.audit.tail import TailFormatter, tail

__all__ = [
    "AuditChain", "AuditReport", "Verification", "audit_run", "build_chain", "AuditError", "ReplayCompleted",
    "replay_stream", "RunIndex", "CounterfactualReplay", "ReplayResult", "replay", "ReplaySpec", "parse_spec",
    "TailFormatter", "tail",
]
