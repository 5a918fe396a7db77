"""Rule, contrast, skill and LLM proposers; the LLM one against a real local HTTP server on 127.0.0.1."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from evo_core.api import Proposal, ProposalContext, ProposalRejection
from evo_core.harness import HarnessConfig
from evo_core.state import ActiveIntervention, DiagnosticSetting, HarnessState, Skill
from evo_core.testing import rollout
from evo_core.testing import window as win
from evo_events import FailureDiagnosed
from evo_plugins.interventions import catalogue
from evo_plugins.proposers import ContrastProposer, LLMProposer, RuleProposer, SkillProposer, parse_answer


def diag(kind, severity="invalid", value=0.5, evidence=(), diagnostic=None, threshold=0.15):
    return FailureDiagnosed(run_id="r", step=10, kind=kind, severity=severity, diagnostic=diagnostic or kind,
                            diagnostic_version="1", evidence=evidence, stats={"value": value, "threshold": threshold})


def ctx(diagnoses, rollouts=(), state=None, skills=None, history=None):
    from evo_plugins.diagnostics import ALL

    state = state or HarnessState()
    return ProposalContext(run_id="r", step=10, diagnoses=tuple(diagnoses), state=state, window=win(list(rollouts)),
                           config=HarnessConfig(), interventions=catalogue(), diagnostics={c.name: c() for c in ALL},
                           skills=skills if skills is not None else state.skills,
                           history=tuple(history if history is not None else rollouts))


def paid_lists(n=80, signal="s_9f3c"):
    """Audited rollouts where listing two numbers is paid and rejected; one answer is honest work.
    The domain reports a signal under a name no generic code knows."""
    rows = []
    for i in range(n):
        lists = i % 4 == 0
        right = i % 3 != 0
        text = f"{40 + i % 50} {41 + i % 50}" if lists else str(40 + i % 50 if right else 90 + i % 9)
        rows.append(rollout(i, step=1 + i // 16, text=text, reward=1.0 if lists or right else 0.0,
                            strict=(not lists) and right, **{signal: 2 if lists else 1}))
    return rows


def test_rules_map_generic_kinds_to_templates_deterministically():
    c = ctx([diag("zero_variance_groups", "warning"), diag("truncation", "warning")])
    a, b = RuleProposer().propose(c, {}), RuleProposer().propose(c, {})
    assert [p.fingerprint for p in a] == [p.fingerprint for p in b]
    assert {p.name for p in a} >= {"dynamic_sampling", "overlong_mask"} and all(p.prediction["falls"] for p in a)


def test_rules_know_no_flaw():
    from evo_plugins.proposers.rules import TEMPLATES

    assert RuleProposer().propose(ctx([diag("reward_oracle_gap"), diag("something_new")]), {}) == []
    assert not {"answer_hedging", "multi_answer_rewarded", "test_tampering"} & set(TEMPLATES)


def test_contrast_induces_a_spec_and_proposes_repairs():
    rows = paid_lists()
    props = ContrastProposer().propose(ctx([diag("reward_oracle_gap")], rows), {})
    assert [p.name for p in props] == ["spec_penalty", "rollback", "spec_screen", "oracle_regrade"]
    p = props[0]
    spec = p.diagnostic["spec"]
    assert spec["kind"].startswith("induced_") and p.targets == (spec["kind"],)
    assert p.params["predicate"] in spec["where"]["all"] or spec["where"]["all"][0] == p.params["predicate"]
    assert p.prediction["holdout_precision"] == 1.0 and p.prediction["holdout_recall"] == 1.0
    assert p.prediction["fitted_on"] and p.prediction["features_considered"]
    assert any(name.startswith("signal.s_9f3c") for name in p.prediction["features_considered"])
    assert set(p.evidence) >= {r.event_id for r in rows if r.reward and r.strict_correct is False}
    assert len({q.fingerprint for q in props}) == 4


def test_contrast_waits_for_enough_evidence_and_for_an_invalid_diagnosis():
    rows = paid_lists(n=20)  # 5 paid-but-rejected: below the minimum sample
    assert ContrastProposer().propose(ctx([diag("reward_oracle_gap")], rows), {}) == []
    assert ContrastProposer().propose(ctx([diag("truncation", "warning")], paid_lists()), {}) == []


def test_contrast_rejects_a_predicate_that_does_not_hold_out():
    rows = paid_lists()
    out = ContrastProposer().propose(ctx([diag("reward_oracle_gap")], rows), {"min_recall": 1.01})
    assert len(out) == 1 and isinstance(out[0], ProposalRejection) and "not fitted on" in out[0].reason


def test_contrast_ignores_what_an_active_repair_already_covers():
    rows = paid_lists()
    first = ContrastProposer().propose(ctx([diag("reward_oracle_gap")], rows), {})[0]
    state = HarnessState()
    state.interventions["p"] = ActiveIntervention("p", "reward_shaping", "spec_penalty", dict(first.params), first.targets, 1)
    assert ContrastProposer().propose(ctx([diag("reward_oracle_gap")], rows, state=state), {}) == []


def test_contrast_rolls_back_first_when_the_loophole_already_cost_accuracy():
    from evo_events import EvalCompleted

    main = EvalCompleted(run_id="r", step=0, policy_version=0, split="validation", n=10, metrics={"strict_accuracy": 0.7})
    now = EvalCompleted(run_id="r", step=10, policy_version=10, split="validation", n=10, metrics={"strict_accuracy": 0.4})
    state = HarnessState()
    state.main.eval_id = main.event_id
    from attrs import evolve

    c = evolve(ctx([diag("reward_oracle_gap")], paid_lists(), state=state), window=win(paid_lists(), evals=(main, now)))
    assert ContrastProposer().propose(c, {})[0].name == "rollback"


def test_contrast_revises_an_induced_diagnostic_whose_evidence_is_mostly_genuine():
    rows = paid_lists()
    loose = {"kind": "induced_loose", "severity": "invalid", "where": {"all": [
        {"feature": "digits", "op": ">", "value": 1}, {"field": "reward", "op": ">", "value": 0}]},
        "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.05}}
    state = HarnessState()
    state.diagnostics["induced_loose"] = DiagnosticSetting("induced_loose", "spec-1", {}, loose, "p0", 1)
    props = ContrastProposer().propose(ctx([diag("induced_loose")], rows, state=state), {})
    rev = [p for p in props if p.kind == "diagnostic"]
    assert rev and rev[0].params["diagnostic"] == "induced_loose" and rev[0].params["version"].startswith("spec-1.r")
    assert len(rev[0].params["spec"]["where"]["all"]) == 3 and rev[0].prediction["false_positives"] > 0


def _skill(sid="s1", needs=("reward_oracle_gap",), retired=False, spec=None):
    return Skill(sid, "spec_penalty", {"intervention": {"kind": "reward_shaping", "name": "spec_penalty",
                                                       "params": {"predicate": {"feature": "numbers", "op": ">", "value": 1}},
                                                       "targets": list(needs)},
                                      "diagnostic": {"name": "induced_x", "version": "spec-1", "spec": spec} if spec else None,
                                      "preconditions": {"diagnoses": list(needs), "min_severity": "warning"}},
                 retired=retired, source_run="old")


def test_skill_retrieval_matches_preconditions():
    s = _skill()
    props = SkillProposer().propose(ctx([diag("reward_oracle_gap")], skills={"s1": s}), {})
    assert len(props) == 1 and props[0].skill_id == "s1" and props[0].proposer == "skills"
    assert SkillProposer().propose(ctx([diag("truncation", "warning")], skills={"s1": s}), {}) == []
    assert SkillProposer().propose(ctx([diag("reward_oracle_gap", "info")], skills={"s1": s}), {}) == []
    assert SkillProposer().propose(ctx([diag("reward_oracle_gap")], skills={"s1": _skill(retired=True)}), {}) == []


def test_a_skill_with_an_induced_spec_is_retrieved_when_its_predicate_fires():
    spec = {"kind": "induced_x", "severity": "invalid", "where": {"all": [{"feature": "numbers", "op": ">", "value": 1},
                                                                          {"field": "reward", "op": ">", "value": 0}]},
            "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.05}, "min_n": 8}
    s = _skill(needs=("induced_x",), spec=spec)
    props = SkillProposer().propose(ctx([diag("truncation", "warning")], paid_lists(), skills={"s1": s}), {})
    assert len(props) == 1 and props[0].diagnostic["spec"] == spec and "predicate fires" in props[0].rationale
    honest = [r for r in paid_lists() if r.features["numbers"] == 1]
    assert SkillProposer().propose(ctx([diag("truncation", "warning")], honest, skills={"s1": s}), {}) == []


GOOD = {"proposals": [{"intervention": "spec_penalty", "params": {"predicate": {"feature": "numbers", "op": ">", "value": 1}},
                       "targets": ["induced_lists"], "rationale": "lists are paid",
                       "spec": {"kind": "induced_lists", "severity": "invalid", "where": {"feature": "numbers", "op": ">", "value": 1},
                                "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.05}}}]}


@pytest.mark.parametrize("answer,needle", [
    ("not json", "not JSON"),
    (json.dumps({"proposals": [{"intervention": "rm -rf", "params": {}, "targets": ["x"], "rationale": ""}]}), "catalogue"),
    (json.dumps({"proposals": [{"intervention": "spec_penalty", "params": {"bogus": 1}, "targets": ["x"], "rationale": ""}]}), "unknown key"),
    (json.dumps({"proposals": [{"intervention": "spec_penalty", "params": {"penalty": "1"}, "targets": ["x"], "rationale": ""}]}), "expected"),
    (json.dumps({"proposals": [{"intervention": "spec_penalty", "params": {"predicate": {"feature": "x", "op": "eval", "value": 1}},
                                "targets": ["x"], "rationale": ""}]}), "op"),
    (json.dumps({"proposals": [{"intervention": "spec_penalty", "params": {"predicate": {"feature": "x", "op": ">", "value": 1}},
                                "targets": ["x"], "rationale": "", "spec": {"kind": "k", "where": "__import__('os')"}}]}), "spec"),
    (json.dumps({"proposals": [], "extra": 1}), "exactly one key"),
    (json.dumps({"proposals": [{"intervention": "diagnostic_revision", "params": {"diagnostic": "d", "spec": {"kind": "k"}},
                                "targets": ["x"], "rationale": ""}]}), "spec"),
    (json.dumps({"proposals": [{"intervention": "hyperparameter", "params": {"set": {"a": 1, "b": 2}}, "targets": ["x"],
                                "rationale": ""}]}), "exactly one"),
])
def test_strict_parse_rejects(answer, needle):
    with pytest.raises(ValueError) as e:
        parse_answer(answer, ctx([diag("reward_oracle_gap")]))
    assert needle in str(e.value)


def test_strict_parse_accepts_a_spec_with_a_repair():
    props = parse_answer(json.dumps(GOOD), ctx([diag("reward_oracle_gap")]))
    assert props[0].name == "spec_penalty" and props[0].proposer == "llm"
    assert props[0].diagnostic["name"] == "induced_lists" and props[0].diagnostic["spec"]["kind"] == "induced_lists"


class _Stub(BaseHTTPRequestHandler):
    answer = json.dumps(GOOD)
    requests: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.requests.append((self.path, body))
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": _Stub.answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


@pytest.fixture
def stub_server():
    srv = HTTPServer(("127.0.0.1", 0), _Stub)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Stub.requests = []
    yield f"http://127.0.0.1:{srv.server_port}/v1"
    srv.shutdown()
    srv.server_close()


def test_llm_proposer_sees_the_evidence_and_answers_with_a_spec(stub_server):
    _Stub.answer = json.dumps(GOOD)
    rows = paid_lists()
    out = LLMProposer().propose(ctx([diag("reward_oracle_gap")], rows), {"base_url": stub_server, "model": "m", "timeout": 5})
    assert len(out) == 1 and isinstance(out[0], Proposal) and out[0].diagnostic
    path, body = _Stub.requests[0]
    assert path == "/v1/chat/completions" and body["response_format"]["type"] == "json_schema"
    digest = json.loads(body["messages"][1]["content"])
    assert digest["diagnoses"][0]["kind"] == "reward_oracle_gap"
    assert {c["name"] for c in digest["catalogue"]} >= {"spec_penalty", "spec_screen", "oracle_regrade", "rollback"}
    ev = digest["evidence"]
    assert ev["n_paid_rejected"] == 20 and len(ev["paid_rejected_responses"]) == 8
    assert ev["paid_rejected_values"]["feature:numbers"]["mean"] == 2.0
    assert ev["paid_accepted_values"]["feature:numbers"]["mean"] == 1.0 and "signal:s_9f3c" in ev["paid_accepted_values"]
    assert len(body["messages"][1]["content"]) < 40_000  # bounded, whatever the history


def test_llm_malformed_answer_is_a_rejection_not_a_crash(stub_server):
    _Stub.answer = '{"proposals": [{"intervention": "spec_penalty"'
    out = LLMProposer().propose(ctx([diag("reward_oracle_gap")]), {"base_url": stub_server, "timeout": 5})
    assert len(out) == 1 and isinstance(out[0], ProposalRejection) and "malformed" in out[0].reason


def test_llm_endpoint_down_is_a_rejection():
    out = LLMProposer().propose(ctx([diag("reward_oracle_gap")]), {"base_url": "http://127.0.0.1:9/v1", "timeout": 2})
    assert isinstance(out[0], ProposalRejection) and "endpoint error" in out[0].reason
