"""The audit chain behind a promotion (or rejection): evidence → diagnoses → proposal →
backtests → gate → harness version, with the hash chain of everything shown verified.

The chain is found by walking ``caused_by`` links back from the decision, plus the
links the events name explicitly (the proposal a decision is about, backtests of that
proposal, the evidence a diagnosis cites, the skill it saved). Nothing is inferred from
timing, so what the audit shows is exactly what the log claims.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import attrs
import structlog

from evo_events import (
    BACKTEST_RESULT_TYPES,
    BACKTEST_RESULTS,
    BlobRef,
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    Promoted,
    Rejected,
    RolloutCompleted,
    SkillRegistered,
    backtest_decision,
)
from evo_core.store import FileBlobStore
from evo_core.store.blobs import get_json

from evo_core.audit.episode import episode_turns
from evo_core.audit.errors import AuditError
from evo_core.audit.index import RunIndex
from evo_core.audit.outcome import assess

log = structlog.get_logger("evo.audit")

DECISION_TYPES = (Promoted.TYPE, Rejected.TYPE)
MAX_DEPTH = 6  # caused_by hops followed back from a decision


@attrs.frozen
class Verification:
    verified: bool
    first_version: int  # the chain was recomputed from this stream version …
    head_version: int  # … to the stream's head
    events_checked: int
    blobs_checked: int
    problem: Optional[str] = None  # one line: the first bad event or blob
    bad_version: Optional[int] = None
    bad_event_id: Optional[str] = None


@attrs.frozen
class AuditChain:
    run_id: str
    decision: dict[str, Any]
    proposal: Optional[dict[str, Any]]
    diagnoses: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    evidence_total: int
    backtests: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    skill: Optional[dict[str, Any]]
    plugin_versions: dict[str, str]
    outcome: dict[str, Any]
    verification: Verification
    shown_versions: tuple[int, ...] = ()
    # The plugins that took part in this decision, ``kind:name`` -> version (the gate records
    # every installed plugin in ``plugin_versions``; this is the part that acted on the chain).
    plugins: dict[str, str] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def blob_link(store: Any, ref: BlobRef) -> str:
    """Where a blob can be opened: a file URL for file-backed blobs, else a content address."""
    if isinstance(store.blobs, FileBlobStore):
        return (store.blobs.root / ref.digest[:2] / ref.digest[2:]).resolve().as_uri()
    return f"blob:sha256:{ref.digest}"


def _ev_meta(ev: Event, version: int) -> dict[str, Any]:
    return {"id": ev.event_id, "version": version, "type": ev.TYPE,
            "emitted_by": f"{ev.emitted_by.name} {ev.emitted_by.version}"}


def find_decision(index: RunIndex, decision_id: str) -> int:
    """Index of the promotion/rejection named by a full id or a unique prefix (≥ 6 chars)."""
    decs = [j for j in index.sparse() if index.records[j].type in DECISION_TYPES]
    exact = [j for j in decs if index.records[j].event_id == decision_id]
    if exact:
        return exact[0]
    hits = [j for j in decs if len(decision_id) >= 6 and index.records[j].event_id.startswith(decision_id)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise AuditError(f"promotion id prefix {decision_id!r} is ambiguous in run {index.run_id!r} ({len(hits)} matches)")
    i = index.index_of(decision_id)
    if i is not None:
        raise AuditError(f"event {decision_id!r} in run {index.run_id!r} is a {index.records[i].type}, not a promotion or rejection")
    n = sum(1 for j in index.sparse() if index.records[j].type == Promoted.TYPE)
    raise AuditError(f"no promotion or rejection {decision_id!r} in run {index.run_id!r} ({n} promotions; list them with `evo audit {index.run_id}`)")


def decisions(index: RunIndex, *, include_rejections: bool = False) -> list[int]:
    types = DECISION_TYPES if include_rejections else (Promoted.TYPE,)
    return [i for i in index.sparse() if index.records[i].type in types]


def _turns_of(store: Any, r: RolloutCompleted, blobs: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
    """The evidence rollout's turns when it is an episode (from its step's trajectory blob,
    read once per blob), else None. A blob that cannot be read shows no turns; whether it is
    intact is the verification's business."""
    if r.trajectory is None:
        return None
    digest = r.trajectory.digest
    if digest not in blobs:
        try:
            blobs[digest] = get_json(store.blobs, r.trajectory)
        except Exception:  # missing, damaged or not JSON: reported by the blob check, not here
            blobs[digest] = None
    return episode_turns(blobs[digest], (r.train or {}).get("trajectory_index"))


def _rollout_summary(store: Any, r: RolloutCompleted, version: int, check_blobs: bool,
                     blobs: Optional[dict[str, Any]] = None) -> tuple[dict[str, Any], Optional[str]]:
    row = {**_ev_meta(r, version), "step": r.step, "task_id": r.task_id, "policy_version": r.policy_version,
           "reward": r.reward, "correct": r.correct, "strict_correct": r.strict_correct, "split": r.split,
           "infra_error": r.infra_error, "length": r.length, "truncated": r.truncated,
           "preview": r.response_preview[:120], "signals": dict(r.signals), "blob": None}
    problem = None
    if r.trajectory is not None:
        status = "not checked"
        if check_blobs:
            problem = store.blobs.check(r.trajectory.digest)
            status = "ok" if problem is None else problem
        row["blob"] = {"digest": r.trajectory.digest, "size": r.trajectory.size,
                       "media_type": r.trajectory.media_type, "link": blob_link(store, r.trajectory), "status": status}
        turns = _turns_of(store, r, {} if blobs is None else blobs) if problem is None else None
        if turns is not None:
            row["turns"] = turns
    return row, problem


def build_chain(index: RunIndex, at: int, *, max_evidence: int = 20, window: int = 10, check_blobs: bool = True) -> AuditChain:
    """The audit chain of the decision at record ``at``."""
    store = index.store
    dec = index.event(at)
    assert isinstance(dec, (Promoted, Rejected))
    shown: set[int] = {at}
    # Walk caused_by back from the decision (bounded), collecting every event it rests on.
    reached: dict[int, Event] = {}
    frontier = list(dec.caused_by)
    proposal_i = index.index_of(dec.subject_id, near=at) if dec.subject == "intervention" else None
    if proposal_i is not None:
        frontier.append(dec.subject_id)
    for _ in range(MAX_DEPTH):
        nxt: list[str] = []
        for eid in frontier:
            j = index.index_of(eid, near=at)
            if j is None or j in reached or j == at:
                continue
            ev = index.event(j)
            reached[j] = ev
            if not isinstance(ev, RolloutCompleted):  # rollouts are leaves
                nxt.extend(ev.caused_by)
        frontier = nxt
        if not frontier:
            break
    proposal = index.event(proposal_i) if proposal_i is not None else None
    if isinstance(proposal, InterventionProposed):
        reached[proposal_i] = proposal  # type: ignore[index]
        # Backtests of this proposal that the decision did not cite (a failed offline one, say).
        needle = b'"proposal_id":"' + proposal.event_id.encode() + b'"'
        for j in index.find_payload(BACKTEST_RESULT_TYPES, needle):
            ev = index.event(j)
            if ev.proposal_id == proposal.event_id:  # type: ignore[attr-defined]
                reached.setdefault(j, ev)
    diag_items = sorted((j, e) for j, e in reached.items() if isinstance(e, FailureDiagnosed))
    bt_items = sorted((j, e) for j, e in reached.items() if isinstance(e, BACKTEST_RESULTS))
    eval_items = sorted((j, e) for j, e in reached.items() if isinstance(e, EvalCompleted))
    # Evidence: rollouts the diagnoses and backtests cite, plus any reached directly.
    ev_ids: list[str] = []
    for _, e in diag_items + bt_items:
        ev_ids.extend(e.evidence)  # type: ignore[attr-defined]
    ev_ids.extend(e.event_id for e in reached.values() if isinstance(e, RolloutCompleted))
    seen: set[str] = set()
    evidence_idx: list[int] = []
    missing_evidence = 0  # cited ids the log does not hold (a cited diagnosis is not missing)
    for eid in ev_ids:
        if eid in seen:
            continue
        seen.add(eid)
        j = index.index_of(eid, near=at)
        if j is None:
            missing_evidence += 1
        elif index.records[j].type == RolloutCompleted.TYPE:
            evidence_idx.append(j)
    evidence_idx.sort()
    evidence: list[dict[str, Any]] = []
    blob_problems: list[tuple[int, str]] = []
    step_blobs: dict[str, Any] = {}  # one trajectory blob per step, read once
    for j in evidence_idx[:max_evidence]:
        row, problem = _rollout_summary(store, index.event(j), index.version(j), check_blobs,  # type: ignore[arg-type]
                                        step_blobs)
        evidence.append(row)
        if problem:
            blob_problems.append((j, problem))
    shown.update(evidence_idx[:max_evidence])
    shown.update(reached)
    skill = None
    if getattr(dec, "skill_id", None):
        needle = b'"skill_id":"' + dec.skill_id.encode() + b'"'  # type: ignore[union-attr]
        for j in index.find_payload((SkillRegistered.TYPE,), needle):
            ev = index.event(j)
            if ev.skill_id == dec.skill_id:  # type: ignore[attr-defined]
                skill = {**_ev_meta(ev, index.version(j)), "skill_id": ev.skill_id, "name": ev.name,  # type: ignore[attr-defined]
                         "bundle": ev.bundle, "provenance": ev.provenance}  # type: ignore[attr-defined]
                shown.add(j)
                break
    # Plugin versions: what the gate recorded plus every emitter and diagnostic on the chain.
    versions: dict[str, str] = {}
    for j in sorted(shown):
        e = index.event(j)
        versions.setdefault(e.emitted_by.name, e.emitted_by.version)
        if isinstance(e, FailureDiagnosed):
            versions.setdefault(e.diagnostic, e.diagnostic_version)
    versions.update({str(k): str(v) for k, v in dec.plugin_versions.items()})
    # Outcome: did the prediction hold afterwards?
    targets: Sequence[str] = proposal.targets if isinstance(proposal, InterventionProposed) else \
        tuple(sorted({e.kind for _, e in diag_items}))
    prediction = dict(proposal.prediction) if isinstance(proposal, InterventionProposed) else {}
    outcome = assess(index, at, dec.step, targets, prediction, window).to_dict()
    outcome["targets"] = list(targets)
    verification = _verify(index, shown, blob_problems, len(evidence))
    decision = {**_ev_meta(dec, index.version(at)), "decision": "promoted" if isinstance(dec, Promoted) else "rejected",
                "subject": dec.subject, "subject_id": dec.subject_id, "step": dec.step, "gate": dec.gate,
                "reasons": list(dec.reasons), "figures": dict(dec.figures),
                "harness_version_before": dec.harness_version_before if isinstance(dec, Promoted) else dec.harness_version,
                "harness_version_after": dec.harness_version_after if isinstance(dec, Promoted) else dec.harness_version,
                "skill_id": getattr(dec, "skill_id", None)}
    prop = None
    if isinstance(proposal, InterventionProposed):
        prop = {**_ev_meta(proposal, index.version(proposal_i)), "step": proposal.step, "kind": proposal.kind,  # type: ignore[operator]
                "name": proposal.name, "params": dict(proposal.params), "targets": list(proposal.targets),
                "prediction": dict(proposal.prediction), "rationale": proposal.rationale,
                "proposer": proposal.proposer, "fingerprint": proposal.fingerprint, "skill_id": proposal.skill_id}
    diagnoses = [{**_ev_meta(e, index.version(j)), "step": e.step, "kind": e.kind, "severity": e.severity,
                  "diagnostic": e.diagnostic, "diagnostic_version": e.diagnostic_version, "stats": dict(e.stats),
                  "message": e.message, "n_evidence": len(e.evidence)} for j, e in diag_items]  # type: ignore[attr-defined]
    backtests = [{**_ev_meta(e, index.version(j)), "passed": backtest_decision(e), "mode": e.mode, "step": e.step,  # type: ignore[attr-defined]
                  "figures": dict(e.figures), "ci": list(e.ci) if e.ci else None, "n": e.n,  # type: ignore[attr-defined]
                  "reasons": list(e.reasons)} for j, e in bt_items]  # type: ignore[attr-defined]
    evals = [{**_ev_meta(e, index.version(j)), "step": e.step, "split": e.split, "n": e.n, "policy_version": e.policy_version,  # type: ignore[attr-defined]
              "metrics": dict(e.metrics), "branch": e.branch} for j, e in eval_items]  # type: ignore[attr-defined]
    if missing_evidence:
        log.warning("audit.evidence_missing", decision=dec.event_id, missing=missing_evidence)
    return AuditChain(index.run_id, decision, prop, diagnoses, evidence, len(evidence_idx), backtests, evals, skill,
                      dict(sorted(versions.items())), outcome, verification, tuple(sorted(index.version(j) for j in shown)),
                      involved_plugins(dec, prop, diagnoses, backtests))


_CORE_EMITTERS = ("evo_harness", "evo_core", "trainer", "evo_trainer")


def involved_plugins(dec: Any, prop: Optional[dict[str, Any]], diagnoses: Sequence[dict[str, Any]],
                     backtests: Sequence[dict[str, Any]]) -> dict[str, str]:
    """``kind:name`` -> version of the plugins that acted on this decision: its diagnostics,
    proposer, intervention, backtesters and gates (the engine once), each named once."""
    recorded = {str(k): str(v) for k, v in dec.plugin_versions.items()}

    def version(kind: str, name: str, fallback: str = "?") -> str:
        return recorded.get(f"{kind}:{name}") or recorded.get(name) or fallback

    out: dict[str, str] = {}
    if "harness_engine" in recorded:
        out["engine:harness_engine"] = recorded["harness_engine"]
    for d in diagnoses:
        out[f"diagnostic:{d['diagnostic']}"] = d["diagnostic_version"] or version("diagnostic", d["diagnostic"])
    if prop is not None:
        if prop["proposer"]:
            out[f"proposer:{prop['proposer']}"] = version("proposer", prop["proposer"],
                                                          prop["emitted_by"].rsplit(" ", 1)[-1])
        out[f"intervention:{prop['name']}"] = version("intervention", prop["name"])
    for b in backtests:
        name, _, ver = b["emitted_by"].rpartition(" ")
        if name and name not in _CORE_EMITTERS:
            out[f"backtester:{name}"] = version("backtester", name, ver)
    for gate in (dec.figures.get("gates") or {}) if isinstance(dec.figures, dict) else {}:
        info = dec.figures["gates"][gate]
        out[f"gate:{gate}"] = str(info.get("version") or version("gate", gate)) if isinstance(info, dict) \
            else version("gate", gate)
    if not any(k.startswith("gate:") for k in out):
        for gate in str(dec.gate).replace(",", "+").split("+"):
            if gate.strip():
                out[f"gate:{gate.strip()}"] = version("gate", gate.strip())
    return out


def _verify(index: RunIndex, shown: set[int], blob_problems: list[tuple[int, str]], n_blobs: int) -> Verification:
    lo = min(shown)
    br = index.verify_range(lo)
    first, head, n = index.version(lo), index.head_version, len(index.records) - lo
    if br is not None:
        j = index.index_of_version(br.version)
        return Verification(False, first, head, n if j is None else j - lo + 1, n_blobs,
                            f"hash chain broken at event #{br.version} ({br.event_id}): {br.reason}",
                            br.version, br.event_id)
    if blob_problems:
        j, problem = blob_problems[0]
        return Verification(False, first, head, n, n_blobs,
                            f"evidence event #{index.version(j)} ({index.records[j].event_id}): {problem}",
                            index.version(j), index.records[j].event_id)
    return Verification(True, first, head, n, n_blobs)


@attrs.frozen
class AuditReport:
    run_id: str
    chains: list[AuditChain]
    promotions: int
    rejections: int

    @property
    def verified(self) -> bool:
        return all(c.verification.verified for c in self.chains)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "promotions": self.promotions, "rejections": self.rejections,
                "verified": self.verified, "chains": [c.to_dict() for c in self.chains]}


def audit_run(store: Any, run_id: str, decision_id: Optional[str] = None, *, max_evidence: int = 20,
              window: int = 10, check_blobs: bool = True, index: Optional[RunIndex] = None) -> AuditReport:
    """Audit every promotion of a run, or the one decision named."""
    index = index or RunIndex(store, run_id)
    promos = decisions(index)
    n_rej = sum(1 for i in index.sparse() if index.records[i].type == Rejected.TYPE)
    targets = [find_decision(index, decision_id)] if decision_id else promos
    chains = [build_chain(index, i, max_evidence=max_evidence, window=window, check_blobs=check_blobs) for i in targets]
    return AuditReport(run_id, chains, len(promos), n_rej)
