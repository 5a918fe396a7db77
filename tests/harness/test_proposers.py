"""Rule, skill and LLM proposers; the LLM one against a real local HTTP server on 127.0.0.1."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import mk, win
from evo_core.harness import HarnessConfig, Proposal, ProposalContext, ProposalRejection
from evo_core.state import HarnessState, Skill
from evo_events import FailureDiagnosed
from evo_plugins.interventions import catalogue
from evo_plugins.proposers import LLMProposer, RuleProposer, SkillProposer, parse_answer


def diag(kind, severity="invalid", value=0.5, evidence=(), diagnostic=None, threshold=0.15):
    return FailureDiagnosed(run_id="r", step=10, kind=kind, severity=severity, diagnostic=diagnostic or kind,
                            diagnostic_version="1", evidence=evidence, stats={"value": value, "threshold": threshold})


def ctx(diagnoses, rollouts=(), state=None, skills=None):
    from evo_plugins.diagnostics import ALL

    state = state or HarnessState()
    return ProposalContext(run_id="r", step=10, diagnoses=tuple(diagnoses), state=state, window=win(list(rollouts)),
                           config=HarnessConfig(), interventions=catalogue(), diagnostics={c.name: c() for c in ALL},
                           skills=skills if skills is not None else state.skills)


def test_rules_map_kinds_to_templates_deterministically():
    c = ctx([diag("answer_hedging"), diag("zero_variance_groups", "warning")])
    a, b = RuleProposer().propose(c, {}), RuleProposer().propose(c, {})
    assert [p.fingerprint for p in a] == [p.fingerprint for p in b]
    assert a[0].name == "multi_answer_penalty" and a[0].targets and a[0].prediction["falls"]
    assert {p.name for p in a} >= {"strict_extraction", "dynamic_sampling"}
    assert all(p.kind in ("reward_shaping", "verifier", "prompt_hint", "rollout_filter", "curriculum") for p in a)


def test_rules_add_a_spec_diagnostic_for_an_oracle_gap():
    props = RuleProposer().propose(ctx([diag("reward_oracle_gap")]), {})
    spec = [p for p in props if p.kind == "diagnostic"]
    assert spec and spec[0].params["spec"]["kind"] == "multi_answer_rewarded"


def test_rules_revise_a_loose_diagnostic_and_leave_a_precise_one():
    genuine = [mk(i, reward=1.0, strict=True, answers=2) for i in range(12)]
    d = diag("answer_hedging", evidence=[r.event_id for r in genuine])
    rev = [p for p in RuleProposer().propose(ctx([d], genuine), {}) if p.kind == "diagnostic"]
    assert rev and rev[0].params["diagnostic"] == "answer_hedging" and rev[0].params["params"]["max_rate"] > 0.15
    assert rev[0].params["version"] != "1"
    invalid = [mk(i, reward=1.0, strict=False, answers=2) for i in range(12)]
    d2 = diag("answer_hedging", evidence=[r.event_id for r in invalid])
    assert not [p for p in RuleProposer().propose(ctx([d2], invalid), {}) if p.kind == "diagnostic"]


def test_rules_propose_nothing_for_unknown_kinds():
    assert RuleProposer().propose(ctx([diag("something_new")]), {}) == []


def _skill(sid="s1", needs=("answer_hedging",), retired=False):
    return Skill(sid, "multi_answer_penalty", {"intervention": {"kind": "reward_shaping", "name": "multi_answer_penalty",
                                                               "params": {"penalty": 1.0}, "targets": list(needs)},
                                              "preconditions": {"diagnoses": list(needs), "min_severity": "warning"}},
                 retired=retired, source_run="old")


def test_skill_retrieval_matches_preconditions():
    s = _skill()
    props = SkillProposer().propose(ctx([diag("answer_hedging")], skills={"s1": s}), {})
    assert len(props) == 1 and props[0].skill_id == "s1" and props[0].proposer == "skills"
    assert SkillProposer().propose(ctx([diag("truncation", "warning")], skills={"s1": s}), {}) == []
    assert SkillProposer().propose(ctx([diag("answer_hedging", "info")], skills={"s1": s}), {}) == []
    assert SkillProposer().propose(ctx([diag("answer_hedging")], skills={"s1": _skill(retired=True)}), {}) == []


GOOD = {"proposals": [{"intervention": "multi_answer_penalty", "params": {"penalty": 0.8}, "targets": ["answer_hedging"],
                       "rationale": "hedges are paid"}]}


@pytest.mark.parametrize("answer,needle", [
    ("not json", "not JSON"),
    (json.dumps({"proposals": [{"intervention": "rm -rf", "params": {}, "targets": ["x"], "rationale": ""}]}), "catalogue"),
    (json.dumps({"proposals": [{"intervention": "multi_answer_penalty", "params": {"bogus": 1}, "targets": ["x"], "rationale": ""}]}), "unknown key"),
    (json.dumps({"proposals": [{"intervention": "multi_answer_penalty", "params": {"penalty": "1"}, "targets": ["x"], "rationale": ""}]}), "expected"),
    (json.dumps({"proposals": [], "extra": 1}), "exactly one key"),
    (json.dumps({"proposals": [{"intervention": "diagnostic_revision", "params": {"diagnostic": "d", "spec": {"kind": "k"}},
                                "targets": ["x"], "rationale": ""}]}), "spec"),
    (json.dumps({"proposals": [{"intervention": "hyperparameter", "params": {"set": {"a": 1, "b": 2}}, "targets": ["x"],
                                "rationale": ""}]}), "exactly one"),
])
def test_strict_parse_rejects(answer, needle):
    with pytest.raises(ValueError) as e:
        parse_answer(answer, ctx([diag("answer_hedging")]))
    assert needle in str(e.value)


def test_strict_parse_accepts_schema_answer():
    props = parse_answer(json.dumps(GOOD), ctx([diag("answer_hedging")]))
    assert props[0].name == "multi_answer_penalty" and props[0].params == {"penalty": 0.8} and props[0].proposer == "llm"


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


def test_llm_proposer_against_local_server(stub_server):
    _Stub.answer = json.dumps(GOOD)
    out = LLMProposer().propose(ctx([diag("answer_hedging")]), {"base_url": stub_server, "model": "m", "timeout": 5})
    assert len(out) == 1 and isinstance(out[0], Proposal) and out[0].params == {"penalty": 0.8}
    path, body = _Stub.requests[0]
    assert path == "/v1/chat/completions" and body["response_format"]["type"] == "json_schema"
    digest = json.loads(body["messages"][1]["content"])
    assert digest["diagnoses"][0]["kind"] == "answer_hedging" and any(c["name"] == "strict_extraction" for c in digest["catalogue"])


def test_llm_malformed_answer_is_a_rejection_not_a_crash(stub_server):
    _Stub.answer = '{"proposals": [{"intervention": "multi_answer_penalty"'
    out = LLMProposer().propose(ctx([diag("answer_hedging")]), {"base_url": stub_server, "timeout": 5})
    assert len(out) == 1 and isinstance(out[0], ProposalRejection) and "malformed" in out[0].reason


def test_llm_endpoint_down_is_a_rejection():
    out = LLMProposer().propose(ctx([diag("answer_hedging")]), {"base_url": "http://127.0.0.1:9/v1", "timeout": 2})
    assert isinstance(out[0], ProposalRejection) and "endpoint error" in out[0].reason
