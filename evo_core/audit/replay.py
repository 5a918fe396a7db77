"""Counterfactual replay: re-run other diagnostics and gates over a run's recorded evidence.

One pass over the run's stream rebuilds the evidence window exactly as the harness saw
it (``EvidenceWindow``: the last ``window_steps`` steps of rollouts, step metrics, evals)
and, every ``diagnose_every`` steps, evaluates the SPEC's diagnostics on it. The findings
are compared with the diagnoses the run recorded, and every recorded decision is
re-judged:

- a proposal whose triggering diagnoses all vanish would not have been made;
- a new ``invalid`` finding the candidate does not target blocks its promotion (the
  validity rule: validity vetoes outrank score);
- SPEC gates re-decide each recorded decision on the recorded proposal, backtests and
  the counterfactual diagnoses.

Replay reads the source run only. Results go to a separate stream
``replay-<run>-<id>`` (see ``evo_core.audit.events``).
"""

from __future__ import annotations

import datetime as _dt
import inspect
import uuid
from typing import Any, Callable, Mapping, Optional, Sequence

import attrs
import structlog

import evo_core
from evo_events import (
    BacktestFailed,
    BacktestPassed,
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    Promoted,
    Rejected,
    RolloutCompleted,
    RunStarted,
    StepCompleted,
)
from evo_core.api import Finding
from evo_core.harness.config import HarnessConfig, HarnessConfigError
from evo_core.harness.specs import SpecError, evaluate_spec, validate_spec
from evo_core.harness.window import EvidenceWindow
from evo_core.state import HarnessState, apply
from evo_core.store import put_json

from evo_core.audit.errors import AuditError
from evo_core.audit.events import AUDIT_EMITTER, ReplayCompleted, replay_stream
from evo_core.audit.index import RunIndex
from evo_core.audit.spec import DiagnosticItem, GateItem, ReplaySpec

log = structlog.get_logger("evo.replay")

_DECISION_STEP_TYPES = (FailureDiagnosed.TYPE, InterventionProposed.TYPE, BacktestPassed.TYPE, BacktestFailed.TYPE,
                        Promoted.TYPE, Rejected.TYPE)


# --- resolved diagnostics -----------------------------------------------------------------


@attrs.frozen
class SpecDiagnostic:
    """A data-only diagnostic (``evo_core.harness.specs``) behind the ``Diagnostic`` protocol."""

    name: str
    spec: dict[str, Any]
    version: str = "spec"
    default_params: Mapping[str, Any] = attrs.Factory(dict)

    def evaluate(self, window: Any, params: Mapping[str, Any]) -> list[Finding]:
        res = evaluate_spec(self.spec, window.rollouts)
        if not res.fired:
            return []
        return [Finding(kind=str(self.spec.get("kind", self.name)), severity=str(self.spec.get("severity", "warning")),
                        evidence=res.evidence, stats=res.stats)]


@attrs.frozen
class Resolved:
    name: str
    version: str
    params: dict[str, Any]
    impl: Any


def _installed(pm: Any, getter: str) -> dict[str, Any]:
    return getattr(pm, getter)()


def resolve_diagnostics(items: Sequence[DiagnosticItem], pm: Any, base: Mapping[str, Mapping[str, Any]]) -> tuple[list[Resolved], set[str]]:
    """SPEC diagnostic items → runnable diagnostics, and the names the SPEC touches (incl. drops)."""
    installed = _installed(pm, "diagnostics")
    touched: set[str] = set()
    out: dict[str, Resolved] = {}
    for it in items:
        touched.add(it.name)
        if it.drop:
            out.pop(it.name, None)
            continue
        if it.spec is not None:
            try:
                validate_spec(it.spec)
            except SpecError as exc:
                raise AuditError(f"SPEC {it.source or it.name}: bad diagnostic spec: {exc}") from None
            out[it.name] = Resolved(it.name, it.version or "spec", dict(it.params), SpecDiagnostic(it.name, it.spec, it.version or "spec"))
            continue
        impl = installed.get(it.name)
        if impl is None:
            have = ", ".join(sorted(installed)) or "none"
            raise AuditError(f"SPEC names diagnostic {it.name!r}, which no installed plugin provides (installed: {have})")
        if it.version is not None and str(impl.version) != it.version:
            raise AuditError(f"SPEC asks for diagnostic {it.name!r} version {it.version}, but version {impl.version} is installed")
        params = {**dict(getattr(impl, "default_params", {}) or {}), **dict(base.get(it.name) or {}), **it.params}
        params.pop("version", None)
        params.pop("spec", None)
        out[it.name] = Resolved(it.name, str(impl.version), params, impl)
    return list(out.values()), touched


def resolve_gates(items: Sequence[GateItem], pm: Any, base: Mapping[str, Mapping[str, Any]]) -> list[Resolved]:
    installed = _installed(pm, "gates")
    out = []
    for it in items:
        impl = installed.get(it.name)
        if impl is None:
            have = ", ".join(sorted(installed)) or "none"
            raise AuditError(f"SPEC names gate {it.name!r}, which no installed plugin provides (installed: {have})")
        if it.version is not None and str(impl.version) != it.version:
            raise AuditError(f"SPEC asks for gate {it.name!r} version {it.version}, but version {impl.version} is installed")
        params = {**dict(getattr(impl, "default_params", {}) or {}), **dict(base.get(it.name) or {}), **it.params}
        out.append(Resolved(it.name, str(impl.version), params, impl))
    return out


# --- results --------------------------------------------------------------------------------


@attrs.frozen
class CFinding:
    step: int
    kind: str
    severity: str
    diagnostic: str
    n_evidence: int
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class RecordedDecision:
    event_id: str
    decision: str  # promoted | rejected
    subject: str
    subject_id: str
    step: int
    gate: str
    index: int
    targets: tuple[str, ...]
    triggers: tuple[tuple[str, int, str], ...]  # (diagnostic, step, kind) of the diagnoses behind the proposal
    proposal: Optional[InterventionProposed] = None
    backtests: tuple[Event, ...] = ()
    state: Optional[HarnessState] = None


@attrs.frozen
class ReplayResult:
    run_id: str
    replay_id: str
    stream: Optional[str]
    spec: ReplaySpec
    plugin_versions: dict[str, str]
    window_steps: int
    every: int
    passes: int
    events_scanned: int
    findings: list[CFinding]
    appeared: list[dict[str, Any]]
    vanished: list[dict[str, Any]]
    flips: list[dict[str, Any]]
    bad_promotions: list[dict[str, Any]] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)

    def summary(self) -> dict[str, Any]:
        out = {"passes": self.passes, "events_scanned": self.events_scanned, "findings": len(self.findings),
               "appeared": len(self.appeared), "vanished": len(self.vanished), "flips": len(self.flips),
               "plugin_failures": len(self.failures)}
        if self.bad_promotions:
            out["bad_promotions"] = len(self.bad_promotions)
            out["caught"] = sum(1 for b in self.bad_promotions if b["blocked"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "replay_id": self.replay_id, "stream": self.stream, "spec": self.spec.to_dict(),
                "plugin_versions": self.plugin_versions, "window_steps": self.window_steps, "every": self.every,
                "summary": self.summary(), "appeared": self.appeared, "vanished": self.vanished, "flips": self.flips,
                "bad_promotions": self.bad_promotions, "failures": self.failures, "notes": self.notes}


# --- the engine ---------------------------------------------------------------------------


def harness_config(config: Mapping[str, Any]) -> HarnessConfig:
    try:
        return HarnessConfig.from_dict((config or {}).get("harness") or {})
    except HarnessConfigError as exc:  # an older log's config: fall back to the defaults, loudly
        log.warning("replay.config_fallback", error=str(exc))
        return HarnessConfig()


class ReplayEngine:
    """One pass over a run; see the module docstring."""

    def __init__(self, store: Any, run_id: str, spec: ReplaySpec, pm: Any, *, window_steps: Optional[int] = None,
                 every: Optional[int] = None, index: Optional[RunIndex] = None,
                 progress: Optional[Callable[[int, int], None]] = None) -> None:
        self.store = store
        self.index = index or RunIndex(store, run_id)
        self.run_id = run_id
        self.spec = spec
        self.pm = pm
        first = self.index.event(0)
        self.config = dict(first.config) if isinstance(first, RunStarted) else {}
        self.hcfg = harness_config(self.config)
        self.window_steps = int(window_steps or self.hcfg.window_steps)
        self.every = int(every or self.hcfg.diagnose_every)
        if self.window_steps < 1 or self.every < 1:
            raise AuditError("--window and --every must be at least 1")
        self.progress = progress
        self._want_state = False
        self._pass_steps: list[int] = []

    def _base_params(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self.hcfg.diagnostics.items()}

    # -- the pass --------------------------------------------------------------------------
    def scan(self, diags: Sequence[Resolved]) -> tuple[list[CFinding], list[FailureDiagnosed], list[RecordedDecision], int, list[str], dict[int, tuple]]:
        """Evaluate ``diags`` over the whole run. Returns findings, recorded diagnoses,
        recorded decisions, the number of passes, plugin failures, and per-pass windows
        (step → (rollouts, evals)) at decision steps for gates."""
        idx = self.index
        recs = idx.records
        win = EvidenceWindow(self.run_id, self.window_steps)
        state = HarnessState()
        findings: list[CFinding] = []
        recorded: list[FailureDiagnosed] = []
        decisions: list[RecordedDecision] = []
        failures: list[str] = []
        windows: dict[int, tuple] = {}
        proposals: dict[str, InterventionProposed] = {}
        backtests: dict[str, list[Event]] = {}
        diag_by_id: dict[str, FailureDiagnosed] = {}
        pending_step: Optional[int] = None
        pending_rollouts: list[RolloutCompleted] = []
        pending_step_ev: Optional[StepCompleted] = None
        pending_evals: list[EvalCompleted] = []
        passes = 0
        evaluated: set[int] = set()
        decision_steps = {idx.event(i).step for i in idx.sparse() if recs[i].type in (Promoted.TYPE, Rejected.TYPE)}  # type: ignore[attr-defined]

        def flush() -> None:
            nonlocal pending_step, pending_rollouts, pending_step_ev, pending_evals, passes
            if pending_step is None:
                return
            s = pending_step
            main_eval = any(e.branch == "main" for e in pending_evals)
            win.add_step(s, pending_rollouts, pending_step_ev, pending_evals)
            pending_step, pending_rollouts, pending_step_ev, pending_evals = None, [], None, []
            # The engine's cadence: every `diagnose_every` steps, and whenever a main-line eval lands.
            if not (s % self.every == 0 or main_eval) or s in evaluated:
                return
            evaluated.add(s)
            passes += 1
            window = win.window(s)
            if s in decision_steps:
                windows[s] = window
            for d in diags:
                try:
                    got = d.impl.evaluate(window, d.params) or []
                except Exception as exc:  # a diagnostic that raises is isolated, as in the live harness
                    failures.append(f"{d.name} {d.version} at step {s}: {type(exc).__name__}: {exc}")
                    continue
                for f in got:
                    st = dict(f.stats or {})
                    findings.append(CFinding(s, f.kind, f.severity, d.name, len(f.evidence), st.get("value", st.get("rate"))))

        n = len(recs)
        tick = max(n // 200, 1)
        for i, rec in enumerate(recs):
            if self.progress is not None and i % tick == 0:
                self.progress(i, n)
            t = rec.type
            if t == RolloutCompleted.TYPE:
                ev = rec.decode()
                if pending_step is not None and ev.step != pending_step:  # type: ignore[attr-defined]
                    flush()
                pending_step = ev.step  # type: ignore[attr-defined]
                pending_rollouts.append(ev)  # type: ignore[arg-type]
                continue
            ev = idx.event(i) if t not in ("evo.PolicyUpdated",) else None
            if ev is None:
                continue
            if isinstance(ev, StepCompleted):
                if pending_step is not None and ev.step != pending_step:
                    flush()
                pending_step = ev.step
                pending_step_ev = ev
            elif isinstance(ev, EvalCompleted):
                if pending_step is None or ev.step == pending_step:
                    pending_step = ev.step
                    pending_evals.append(ev)
                else:
                    win.evals.append(ev)
            elif t in _DECISION_STEP_TYPES:
                flush()  # the harness decides after the step's evidence is in
                if isinstance(ev, FailureDiagnosed):
                    recorded.append(ev)
                    diag_by_id[ev.event_id] = ev
                    win.add_diagnoses([ev])
                elif isinstance(ev, InterventionProposed):
                    proposals[ev.event_id] = ev
                elif isinstance(ev, (BacktestPassed, BacktestFailed)):
                    backtests.setdefault(ev.proposal_id, []).append(ev)
                elif isinstance(ev, (Promoted, Rejected)):
                    decisions.append(self._decision(ev, i, proposals, backtests, diag_by_id,
                                                    state.copy() if self._want_state else None))
            apply(state, ev, i + 1)
        flush()
        if self.progress is not None:
            self.progress(n, n)
        self._pass_steps = sorted(evaluated)
        return findings, recorded, decisions, passes, failures, windows

    def _decision(self, ev: Promoted | Rejected, i: int, proposals: dict[str, InterventionProposed],
                  backtests: dict[str, list[Event]], diag_by_id: dict[str, FailureDiagnosed], state: Optional[HarnessState]) -> RecordedDecision:
        prop = proposals.get(ev.subject_id) if ev.subject == "intervention" else None
        triggers: list[tuple[str, int, str]] = []
        if prop is not None:
            for cid in prop.caused_by:
                d = diag_by_id.get(cid)
                if d is not None:
                    triggers.append((d.diagnostic, d.step, d.kind))
        return RecordedDecision(ev.event_id, "promoted" if isinstance(ev, Promoted) else "rejected", ev.subject,
                                ev.subject_id, ev.step, ev.gate, i, tuple(prop.targets) if prop else (), tuple(triggers),
                                prop, tuple(backtests.get(ev.subject_id, ())), state)

    # -- comparison ------------------------------------------------------------------------
    def run(self, *, find_bad: bool = False, write: bool = True, replay_id: Optional[str] = None) -> ReplayResult:
        notes: list[str] = []
        base = self._base_params()
        items = list(self.spec.diagnostics)
        if find_bad:
            # The later harness: the diagnostics in force at the run's last harness version, then the SPEC.
            final = self._final_state()
            later = []
            installed = _installed(self.pm, "diagnostics")
            for name, setting in final.diagnostics.items():
                if setting.spec:
                    later.append(DiagnosticItem(name, None, dict(setting.params), dict(setting.spec), source="later harness"))
                elif name in installed:
                    later.append(DiagnosticItem(name, None, dict(setting.params), source="later harness"))
                else:
                    notes.append(f"later-harness diagnostic {name!r} is not installed; not replayed")
            items = later + items
            base = {**base, **{n: dict(s.params) for n, s in final.diagnostics.items()}}
        if not items and not self.spec.gates:
            raise AuditError("nothing to replay: give --with SPEC (a diagnostic, gate:NAME, -NAME or a file)")
        diags, touched = resolve_diagnostics(items, self.pm, base)
        gates = resolve_gates(self.spec.gates, self.pm, {k: dict(v) for k, v in self.hcfg.gates.items()})
        self._want_state = bool(gates)  # gates see the harness state at the decision; copying it costs
        findings, recorded, decisions, passes, failures, windows = self.scan(diags)
        rec_keys = {(d.diagnostic, d.step, d.kind) for d in recorded if d.diagnostic in touched}
        cf_keys: dict[tuple[str, int, str], CFinding] = {}
        for f in findings:
            cf_keys.setdefault((f.diagnostic, f.step, f.kind), f)
        recorded_kinds_at = {(d.step, d.kind) for d in recorded}
        appeared = [cf_keys[k].to_dict() for k in sorted(set(cf_keys) - rec_keys, key=lambda k: (k[1], k[0], k[2]))]
        vanished = [{"diagnostic": k[0], "step": k[1], "kind": k[2]} for k in sorted(rec_keys - set(cf_keys), key=lambda k: (k[1], k[0], k[2]))]
        vanished_set = rec_keys - set(cf_keys)
        by_pass: dict[int, list[CFinding]] = {}
        for f in findings:
            by_pass.setdefault(f.step, []).append(f)
        flips: list[dict[str, Any]] = []
        verdicts: dict[str, dict[str, Any]] = {}
        self._init_main_line()
        for dec in decisions:
            v = self._rejudge(dec, vanished_set, by_pass, recorded, recorded_kinds_at, touched, gates, windows)
            verdicts[dec.event_id] = v
            self._advance_main_line(dec, v["would"], windows.get(dec.step))
            if v["would"] != dec.decision:
                flips.append(v)
        bad: list[dict[str, Any]] = []
        if find_bad:
            bad = self._bad_promotions(decisions, verdicts)
        versions = {d.name: d.version for d in diags}
        versions.update({f"gate:{g.name}": g.version for g in gates})
        versions["evo_core"] = evo_core.__version__
        result = ReplayResult(self.run_id, replay_id or uuid.uuid4().hex[:12], None, self.spec, versions,
                              self.window_steps, self.every, passes, len(self.index.records), findings, appeared,
                              vanished, flips, bad, failures, notes)
        if write:
            result = attrs.evolve(result, stream=self._write(result, find_bad))
        return result

    # -- the counterfactual main line ------------------------------------------------------
    # A policy gate compares a candidate with the main line. Under the replayed harness the
    # main line is the last checkpoint *it* would have promoted, not the recorded one.
    def _init_main_line(self) -> None:
        evals = [self.index.event(i) for i in self.index.sparse()]
        self._main_evals = {e.policy_version: e for e in evals if isinstance(e, EvalCompleted) and e.branch == "main"}
        self._cf_main_eval = self._main_evals.get(0)
        self._cf_main_reward: Optional[float] = None
        self._cf_last_gate_step = -1

    def _train_reward_since(self, window: Any, after_step: int, upto_step: int) -> Optional[float]:
        if window is None:
            return None
        rs = [r.reward for r in window.rollouts
              if after_step < r.step <= upto_step and r.split == "train" and r.reward is not None]
        return sum(rs) / len(rs) if rs else None

    def _policy_candidate_fields(self, dec: RecordedDecision, window: Any) -> dict[str, Any]:
        if dec.subject != "policy":
            return {}
        reward = self._train_reward_since(window, self._cf_last_gate_step, dec.step)
        main_reward = self._cf_main_reward if self._cf_main_reward is not None else reward
        try:
            cand_eval = self._main_evals.get(int(dec.subject_id))
        except ValueError:
            cand_eval = None
        return {"eval": cand_eval, "main_eval": self._cf_main_eval, "train_reward": reward, "main_train_reward": main_reward}

    def _advance_main_line(self, dec: RecordedDecision, would: str, window: Any) -> None:
        if dec.subject != "policy":
            return
        fields = self._policy_candidate_fields(dec, window)
        if self._cf_main_reward is None:
            self._cf_main_reward = fields.get("main_train_reward")
        if would == "promoted":
            self._cf_main_eval = fields.get("eval") or self._cf_main_eval
            self._cf_main_reward = fields.get("train_reward", self._cf_main_reward)
        self._cf_last_gate_step = dec.step

    def _final_state(self) -> HarnessState:
        st = HarnessState()
        for i in self.index.sparse():
            apply(st, self.index.event(i), i + 1)
        return st

    def _pass_at(self, step: int) -> int:
        """The last diagnostic pass at or before ``step`` (what a decision at ``step`` saw)."""
        import bisect

        k = bisect.bisect_right(self._pass_steps, step)
        return self._pass_steps[k - 1] if k else -1

    def _rejudge(self, dec: RecordedDecision, vanished: set, by_pass: dict[int, list[CFinding]],
                 recorded: list[FailureDiagnosed], recorded_kinds_at: set, touched: set[str], gates: list[Resolved],
                 windows: dict[int, Any]) -> dict[str, Any]:
        reasons: list[str] = []
        would = dec.decision
        if dec.triggers and all(t[0] in touched and t in vanished for t in dec.triggers):
            would = "not proposed"
            reasons.append("every diagnosis behind the proposal vanishes: " + ", ".join(f"{k}@{s}" for _, s, k in dec.triggers))
        p = self._pass_at(dec.step)
        new_invalid = [f for f in by_pass.get(p, []) if f.severity == "invalid" and (f.step, f.kind) not in recorded_kinds_at
                       and f.kind not in dec.targets]
        if would == "promoted" and new_invalid:
            would = "rejected"
            reasons.append("validity: new invalid diagnosis " + ", ".join(sorted({f"{f.kind} ({f.diagnostic})" for f in new_invalid})))
        for g in gates:
            verdict = self._gate(g, dec, by_pass.get(p, []), recorded, touched, windows.get(dec.step))
            if verdict is None:
                continue
            passed, why = verdict
            if would == "promoted" and not passed:
                would = "rejected"
                reasons.append(f"gate {g.name} {g.version}: " + (why or "blocks"))
            elif would == "rejected" and passed and dec.gate == g.name and not new_invalid:
                would = "promoted"
                reasons.append(f"gate {g.name} {g.version} (which rejected it) now passes" + (f": {why}" if why else ""))
        return {"decision_id": dec.event_id, "subject": dec.subject, "subject_id": dec.subject_id, "step": dec.step,
                "recorded": dec.decision, "would": would, "reasons": reasons}

    def _gate(self, g: Resolved, dec: RecordedDecision, cf: list[CFinding], recorded: list[FailureDiagnosed],
              touched: set[str], window: Any) -> Optional[tuple[bool, str]]:
        from evo_core.harness.types import BacktestOutcome, Candidate, GateContext, Proposal

        # Active diagnoses at the decision: recorded ones from untouched diagnostics + counterfactual findings.
        active = [d for d in recorded if d.step == self._pass_at(dec.step) and d.diagnostic not in touched]
        active += [FailureDiagnosed(run_id=self.run_id, step=f.step, kind=f.kind, severity=f.severity, diagnostic=f.diagnostic,
                                    diagnostic_version="replay", stats={"value": f.value}, emitted_by=AUDIT_EMITTER) for f in cf]
        proposal = None
        if dec.proposal is not None:
            pr = dec.proposal
            try:
                proposal = Proposal(kind=pr.kind, name=pr.name, params=dict(pr.params), targets=pr.targets,
                                    prediction=dict(pr.prediction), rationale=pr.rationale, proposer=pr.proposer,
                                    skill_id=pr.skill_id, evidence=tuple(pr.caused_by))
            except ValueError:
                proposal = None
        bts = tuple(BacktestOutcome(backtester=b.emitted_by.name, mode=b.mode, passed=isinstance(b, BacktestPassed),  # type: ignore[attr-defined]
                                    figures=dict(b.figures), ci=tuple(b.ci) if b.ci else None, n=b.n,  # type: ignore[attr-defined]
                                    reasons=b.reasons, evidence=b.evidence, version=b.emitted_by.version)  # type: ignore[attr-defined]
                    for b in dec.backtests)
        evals = [e for e in (window.evals if window is not None else ()) if e.step <= dec.step and e.branch == "main"]
        extra = {"eval": evals[-1] if evals else None, **{k: v for k, v in self._policy_candidate_fields(dec, window).items()
                                                         if v is not None}}
        cand = Candidate(subject=dec.subject, subject_id=dec.subject_id, step=dec.step, proposal=proposal, backtests=bts,
                         rollouts=tuple(window.rollouts) if window is not None else (), **extra)
        cfg = attrs.evolve(self.hcfg, gates={**self.hcfg.gates, g.name: g.params})
        ctx = GateContext(run_id=self.run_id, step=dec.step, state=dec.state or HarnessState(), config=cfg, diagnoses=tuple(active))
        subjects = getattr(g.impl, "subjects", None)
        if subjects is not None and dec.subject not in subjects:
            return None
        try:
            n_args = len(inspect.signature(g.impl.decide).parameters)
            res = g.impl.decide(cand, ctx, g.params) if n_args >= 3 else g.impl.decide(cand, ctx)
        except Exception as exc:
            raise AuditError(f"gate {g.name} {g.version} failed on decision {dec.event_id}: {type(exc).__name__}: {exc}") from None
        if getattr(res, "abstain", False):
            return None
        passed = bool(getattr(res, "passed", True)) and not bool(getattr(res, "veto", False))
        return passed, "; ".join(getattr(res, "reasons", ()) or ())

    def _bad_promotions(self, decisions: list[RecordedDecision], verdicts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """Promotions the strict oracle's labels call harmful, and whether the later harness blocks them."""
        from evo_core.audit.outcome import assess

        out = []
        for dec in decisions:
            if dec.decision != "promoted":
                continue
            pred = dict(dec.proposal.prediction) if dec.proposal is not None else {}
            o = assess(self.index, dec.index, dec.step, dec.targets, pred, self.window_steps)
            if o.strict_held is not None:
                harmful, basis = (not o.strict_held), "strict labels on rollouts"
            elif o.guard_held is not None:
                harmful, basis = (not o.guard_held), f"held-out {o.guard_metric}"
            else:
                continue
            v = verdicts[dec.event_id]
            blocked = v["would"] != "promoted"
            if harmful or blocked:
                out.append({"decision_id": dec.event_id, "subject": dec.subject, "subject_id": dec.subject_id,
                            "step": dec.step, "harmful": harmful, "blocked": blocked, "basis": basis,
                            "strict_accuracy": [o.before.strict_accuracy, o.after.strict_accuracy],
                            "exploit_rate": [o.before.exploit_rate, o.after.exploit_rate],
                            "guard": [o.before.guard, o.after.guard], "reasons": v["reasons"],
                            "verdict": "caught" if harmful and blocked else "missed" if harmful else "false alarm"})
        return out

    # -- writing ---------------------------------------------------------------------------
    def _write(self, result: ReplayResult, find_bad: bool) -> str:
        stream = replay_stream(self.run_id, result.replay_id)
        head = self.index.records[-1]
        blob = put_json(self.store.blobs, [f.to_dict() for f in result.findings])
        cap = 500  # the full lists are in the findings blob and recomputable; keep the event small
        ev = ReplayCompleted(
            run_id=self.run_id, emitted_by=AUDIT_EMITTER, replay_id=result.replay_id, source_stream=self.index.stream,
            source_head_version=head.version, source_head_hash=head.hash, spec=result.spec.to_dict(),
            plugin_versions=result.plugin_versions,
            settings={"window_steps": result.window_steps, "every": result.every, "find_bad": find_bad,
                      "evo_core": evo_core.__version__},
            summary=result.summary(), appeared=result.appeared[:cap], vanished=result.vanished[:cap],
            flips=result.flips[:cap], bad_promotions=result.bad_promotions[:cap], findings=blob,
            completed_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        )
        self.store.append(stream, [ev], expected_version=0)
        return stream


def replay(store: Any, run_id: str, spec: ReplaySpec, pm: Any, *, find_bad: bool = False, write: bool = True,
           window_steps: Optional[int] = None, every: Optional[int] = None, progress=None) -> ReplayResult:
    return ReplayEngine(store, run_id, spec, pm, window_steps=window_steps, every=every, progress=progress).run(
        find_bad=find_bad, write=write)
