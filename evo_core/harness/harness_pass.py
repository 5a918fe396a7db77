"""One step's harness work, as one object.

``HarnessPass.run`` takes the steps in order: diagnose, retire what did not work, the
proposal round (propose, backtest, gate each proposal), then the policy gate. Each step is a
method; the pass owns its state (a working copy of the fold, its event buffer and counts).
The collaborators it calls (``proposals``, ``backtesting``, ``retirement``, ``mainline``,
``gating``) take values and return values or events; only the pass calls the proposers,
backtesters and gates (each under its isolation guard) and only the pass emits.
Every emitted event is folded at once, so later decisions of the same pass see earlier ones
exactly as a replay of the log would.

Live, replayed or in a test, the pass is the same: what differs is the ``HarnessPort`` it
is given (``evo_core.harness.ports``).
"""

from __future__ import annotations

import traceback
from typing import Mapping, Optional, Sequence

import structlog

from evo_core import faults
from evo_core.api import (BacktestContext, BacktestOutcome, Candidate, GateContext, GateDecision, Proposal, ProposalContext,
                          ProposalRejection, is_validation)
from evo_core.harness import backtesting, mainline, paywatch, proposals, retirement
from evo_core.harness.diagnosis import SEVERITY_RANK, with_watched
from evo_core.harness.config import HarnessConfig
from evo_core.harness.diagnosis import Diagnoses
from evo_core.harness.emit import ENGINE, PassBuffer, jsonable
from evo_core.harness.inputs import Catalog, PassInput
from evo_core.harness import gating
from evo_core.harness.gating import Verdict, decision_events
from evo_core.harness.isolation import Isolation
from evo_core.harness.skills import load_skill_sources
from evo_core.plugins import PluginFailure
from evo_core.state import HarnessState
from evo_events import (
    EvalCompleted,
    Emitter,
    Event,
    FailureDiagnosed,
    HarnessPassCompleted,
    SkillRegistered,
    SkillRetired,
)

log = structlog.get_logger("evo.harness")


class HarnessPass:
    """One step's harness work; see the module docstring."""

    def __init__(self, config: HarnessConfig, catalog: Catalog, diagnoses: Diagnoses, versions: Mapping[str, str],
                 run_id: str, inp: PassInput) -> None:
        self.config, self.catalog, self.diagnoses, self.versions = config, catalog, diagnoses, dict(versions)
        self.run_id, self.step, self.inp = run_id, inp.step, inp
        self.evidence = inp.evidence
        self.port = inp.port
        self.buf = PassBuffer(inp.state.copy())
        self.iso = Isolation(self.run_id, self.step, self.buf.emit, ENGINE)
        self.proposed = 0
        self.decided = 0

    @property
    def state(self) -> HarnessState:
        return self.buf.state

    @property
    def events(self) -> list[Event]:
        return self.buf.events

    def emit(self, *events: Event) -> None:
        self.buf.emit(*events)

    # -- the pass ----------------------------------------------------------------------------
    def run(self) -> list[Event]:
        if self.state.passes == 0:
            self._report_missing()
            self._import_skills()
        gated = set(self.state.gated_evals) | {self.state.main.eval_id}
        new_evals = [e for e in self.inp.evals if is_validation(e) and e.event_id not in gated]
        due = self.step % self.config.diagnose_every == 0 or self.inp.final or bool(new_evals)
        findings: list[FailureDiagnosed] = []
        if due:
            findings = self.diagnose()
            faults.point("harness.diagnosed")
            if self.config.evolving:
                self.retire(findings)
                self.propose(findings)
        if mainline.gate_due(self.config, self.state, self.step, self.evidence, new_evals):
            self.policy_gate(new_evals[-1] if new_evals else self.evidence.evals[-1], findings if due else None)
        self.emit(HarnessPassCompleted(run_id=self.run_id, step=self.step, harness_version=self.state.harness_version,
                                       diagnosed=due, active=tuple(d.event_id for d in findings),
                                       proposals=self.proposed, decisions=self.decided, emitted_by=ENGINE))
        return self.events

    def _report_missing(self) -> None:
        """Configured but not installed: said once, on the run's first pass."""
        cfg = self.config
        for name in self.diagnoses.missing(self.state):
            self.iso.missing(name, "evo_register_diagnostics", "diagnostic")
        for name, params in cfg.proposers.items():
            if dict(params).get("enabled", True) is not False and name not in self.catalog.proposers:
                self.iso.missing(name, "evo_register_proposers", "proposer")
        for name in cfg.backtest.plan:
            if name not in self.catalog.backtesters:
                self.iso.missing(name, "evo_register_backtesters", "backtester")

    def _import_skills(self) -> None:
        cfg = self.config
        if not cfg.evolving or cfg.ablations.no_skill_reuse or not cfg.skills_from:
            return
        skills = None
        with self.iso.guard("skills_from", "load") as g:
            skills = load_skill_sources(cfg.skills_from)
        for sk in skills or () if not g.failed else ():
            if sk["skill_id"] in self.state.skills:
                continue
            prov = dict(sk.get("provenance") or {})
            prov["imported_from"] = sk.get("origin", "")
            self.emit(SkillRegistered(run_id=self.run_id, skill_id=sk["skill_id"], name=sk["name"],
                                      bundle=dict(sk["bundle"]), provenance=prov, source_run=sk.get("source_run"),
                                      emitted_by=ENGINE))

    # -- diagnose ----------------------------------------------------------------------------
    def diagnose(self) -> list[FailureDiagnosed]:
        results, failed = self.diagnoses.run(self.evidence.window(self.step), self.state)
        for name, exc in failed:
            self.iso.failed(PluginFailure.of(name, "evaluate", exc, "".join(traceback.format_exception(exc, limit=5))))
        events: list[FailureDiagnosed] = []
        for diag, setting, f in results:
            if f.severity not in SEVERITY_RANK:
                self.iso.failed(PluginFailure(diag.name, "evaluate", "ValueError",
                                              f"severity {f.severity!r} is not info|warning|invalid"))
                continue
            version = setting.version or str(diag.version)
            events.append(FailureDiagnosed(
                run_id=self.run_id, step=self.step, kind=f.kind, severity=f.severity, diagnostic=setting.name,
                diagnostic_version=version, evidence=tuple(f.evidence), stats=jsonable(dict(f.stats)),
                message=f.message, caused_by=tuple(f.evidence)[:50], emitted_by=Emitter(setting.name, version)))
        self.emit(*events)
        self.evidence.add_diagnoses(events)
        return events

    # -- retire ------------------------------------------------------------------------------
    def retire(self, findings: Sequence[FailureDiagnosed]) -> None:
        window = self.evidence.window(self.step)
        self.watch_pay(window)
        for pid, active in sorted(self.state.interventions.items(), key=lambda kv: kv[1].since_harness_version):
            if not retirement.due(active, self.step, self.config.window_steps):
                continue
            now = self.diagnoses.target_value(active.targets, window, self.state, findings)
            self.emit(*retirement.retirement(self.run_id, self.step, self.state, pid, active, now, findings))

    def watch_pay(self, window: object) -> None:
        """A change that raises rewards is switched off, at any pass, once the oracle rejects
        what it paid significantly more often than what the verifier paid (``paywatch``)."""
        checks = paywatch.watch(self.state, self.catalog.interventions, getattr(window, "rollouts", ()),
                                self.evidence.history(), window_steps=self.config.window_steps)
        for pid, check in sorted(checks.items()):
            active = self.state.interventions.get(pid)
            if active is None or not check.loophole:
                continue
            log.info("pay_watch_retired", name=active.name, step=self.step, reason=check.describe())
            self.emit(*paywatch.retire_events(self.run_id, self.step, self.state, active, check))

    # -- propose, backtest, gate -------------------------------------------------------------
    def propose(self, findings: Sequence[FailureDiagnosed]) -> None:
        """The proposal round: collect, filter through the ledger, and evaluate each proposal
        until the round's budget is spent, one training change per diagnosis."""
        actionable = [d for d in findings if SEVERITY_RANK.get(d.severity, 0) >= 1]
        last = self.state.last_promotion_step
        if not actionable or (last is not None and self.step - last < self.config.cooldown_steps):
            return
        window = self.evidence.window(self.step)
        collected, rejections = self._ask_proposers(self._proposal_context(actionable, window))
        for name, item in rejections:
            self.emit(proposals.rejection_event(self.run_id, self.step, self.state, name, item,
                                                str(self.catalog.proposers[name].version)))
        promoted_targets: set[str] = set()
        tried = 0
        for prop in proposals.ledger_filter(self.state, self.config, self.step, collected, diagnoses=self.diagnoses,
                                            window=window, findings=actionable):
            if tried >= self.config.max_proposals_per_round:
                break
            if paywatch.blocked(self.state, prop.name, prop.params):
                continue  # this repair with this predicate was retired as a loophole
            if prop.kind != "diagnostic" and set(prop.targets) & promoted_targets:
                continue  # single factor: one training change per diagnosis per round
            tried += 1
            if self.evaluate(prop, actionable) and prop.kind != "diagnostic":
                promoted_targets |= set(prop.targets)

    def _ask_proposers(self, pctx: ProposalContext) -> tuple[list[Proposal], list[tuple[str, ProposalRejection]]]:
        """What every enabled, installed proposer suggests (each under the guard)."""
        collected: list[Proposal] = []
        rejections: list[tuple[str, ProposalRejection]] = []
        for name, proposer, params in proposals.enabled(self.config, self.catalog.proposers):
            items = None
            with self.iso.guard(name, "propose") as g:
                items = proposer.propose(pctx, params)
            if not g.failed:
                props, rejected = proposals.answers(name, items)
                collected += props
                rejections += rejected
        return collected, rejections

    def _proposal_context(self, actionable: Sequence[FailureDiagnosed], window: object) -> ProposalContext:
        cfg = self.config
        skills = {} if cfg.ablations.no_skill_reuse else {k: s for k, s in self.state.skills.items() if not s.retired}
        return ProposalContext(run_id=self.run_id, step=self.step, diagnoses=tuple(actionable), state=self.state,
                               window=window, config=cfg, interventions=self.catalog.interventions,
                               diagnostics=self.catalog.diagnostics, skills=skills,
                               history=self.evidence.history(), audited=self.evidence.audited(),
                               audited_index=self.evidence.audited_index(),
                               seed=cfg.backtest.seed + self.step)

    def evaluate(self, prop: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> bool:
        """One proposal: logged, backtested, gated, decided. Whether it was promoted."""
        targeted = [d for d in diagnoses if d.kind in set(prop.targets)] or list(diagnoses)
        prop_ev = proposals.proposal_event(self.run_id, self.step, prop, targeted)
        self.emit(prop_ev)
        self.proposed += 1
        faults.point("harness.proposed")
        outcomes = self.backtest(prop, diagnoses)
        bt_events = [backtesting.outcome_event(self.run_id, self.step, prop_ev.event_id, o) for o in outcomes]
        self.emit(*bt_events)
        cand = Candidate(subject="intervention", subject_id=prop_ev.event_id, step=self.step, proposal=prop,
                         backtests=tuple(outcomes))
        v = self.gate(cand, mainline.records(diagnoses))
        value = self.diagnoses.target_value(prop.targets, self.evidence.window(self.step),
                                            with_watched(self.state, prop.diagnostic), diagnoses)
        events = decision_events(self.run_id, self.step, self.state.harness_version, cand, v, self.versions,
                                 caused_by=tuple(e.event_id for e in bt_events) or (prop_ev.event_id,), figures={},
                                 proposal_event=prop_ev, diagnoses=targeted, backtest_events=bt_events,
                                 target_value=value)
        self.emit(*events)
        self.decided += 1
        faults.point("harness.decided")
        log.info("promoted" if v.accepted else "rejected", subject="intervention", name=prop.name, step=self.step,
                 harness_version=self.state.harness_version, reasons=v.reasons[:2])
        if v.accepted and getattr(self.catalog.interventions.get(prop.name), "restore_main", False):
            self._restore((events[0].event_id,))
        if prop.skill_id and any(o.mode == "online" and o.figures.get("fingerprint_ok") is False for o in outcomes):
            self.emit(SkillRetired(run_id=self.run_id, skill_id=prop.skill_id, step=self.step,
                                   reason="fingerprint check failed: the targeted diagnosis did not fall in treatment",
                                   evidence=tuple(e.event_id for e in bt_events), emitted_by=ENGINE))
        return v.accepted

    def backtest(self, prop: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> list[BacktestOutcome]:
        watched = with_watched(self.state, prop.diagnostic)
        restore_main = bool(getattr(self.catalog.interventions.get(prop.name), "restore_main", False))
        ctx = BacktestContext(run_id=self.run_id, step=self.step, state=self.state,
                              window=self.evidence.window(self.step), config=self.config,
                              interventions=self.catalog.interventions, diagnostics=self.catalog.diagnostics,
                              diagnoses=tuple(diagnoses), seed=self.config.backtest.seed + self.step,
                              history=self.evidence.history(),
                              reader=self.diagnoses.view(watched, self.run_id, self.step),
                              arms=backtesting.arms(self.state, prop, restore_main))
        outcomes: list[BacktestOutcome] = []
        for name in backtesting.plan(self.config, self.catalog.backtesters, prop):
            bt = self.catalog.backtesters.get(name)
            if bt is None:
                outcomes.append(backtesting.not_installed(name))
                break
            res = backtesting.unpaid(bt, name, ctx, self.port)
            if res is None:
                with self.iso.guard(name, "backtest") as g:  # online ones through the port: it forks training
                    res = self.port.online_backtest(bt, prop, ctx) if getattr(bt, "mode", "offline") == "online" \
                        else bt.backtest(prop, ctx)
                res = backtesting.settled(bt, name, res, g.failed)
            faults.point("harness.backtested")
            outcomes.append(res)
            if res.passed is False:
                break  # no point paying for an online fork after a failed replay
        return outcomes

    def gate(self, cand: Candidate, in_force: Sequence[object]) -> Verdict:
        gctx = GateContext(run_id=self.run_id, step=self.step, state=self.state, config=self.config,
                           diagnoses=tuple(in_force))
        decisions: list[GateDecision] = []
        for name, gate, params in gating.configured(self.catalog.gates, self.config.gates, cand.subject):
            if gate is None:
                decisions.append(gating.not_installed(name))
                continue
            d = None
            with self.iso.guard(name, "decide") as g:
                d = gate.decide(cand, gctx, params)
            decisions.append(gating.raised(name) if g.failed or d is None else d)
        return gating.verdict(decisions)

    # -- the policy gate ---------------------------------------------------------------------
    def policy_gate(self, ev: EvalCompleted, findings: Optional[Sequence[FailureDiagnosed]]) -> None:
        """The evaluated checkpoint joins the main line (its weights persisted) or not; a
        rejection may send training back to the main line."""
        state = self.state
        cand = mainline.candidate(state, self.evidence, ev, self.step)
        in_force = mainline.records(findings) if findings is not None else list(state.active_diagnoses)
        v = self.gate(cand, in_force)
        checkpoint, digest = None, ""
        if v.accepted:
            snap = None
            with self.iso.guard("trainer", "snapshot") as g:
                snap = self.port.snapshot(self.step, ev.policy_version)
            if not g.failed and snap is not None:
                checkpoint, digest = snap.checkpoint, snap.digest
        events = decision_events(self.run_id, self.step, state.harness_version, cand, v, self.versions,
                                 caused_by=(ev.event_id,) + tuple(d.event_id for d in in_force),
                                 figures=mainline.figures(self.config, state, cand), checkpoint=checkpoint,
                                 digest=digest)
        self.emit(*events)
        self.decided += 1
        faults.point("harness.policy_gated")
        if mainline.wants_restore(self.config, state, v):
            self._restore((events[0].event_id,))

    def _restore(self, caused_by: tuple[str, ...]) -> None:
        restore = mainline.restore_event(self.run_id, self.step, self.state, caused_by)
        if restore is None:
            self.iso.missing("main_line_checkpoint", "restore", "the main line's weights")
        else:
            self.emit(restore)
