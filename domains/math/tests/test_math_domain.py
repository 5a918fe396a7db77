"""The math Domain as the engine sees it: entry point, protocol, verdicts, grade_cli."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evo_core.api import Completion, Domain, Task, Verdict
from evo_core.plugins import PluginManager
from evo_events import RolloutCompleted
from evo_events.codec import decode_payload, encode_payload
from evo_math import grade_cli
from evo_math.domain import MathDomain
from evo_math.pool import VerifierPool

HEDGE = "Either \\boxed{3} or \\boxed{4}."


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(2, timeout_s=1.0, grace_s=1.0) as p:
        yield p


@pytest.fixture()
def domain(pool):
    return MathDomain(pool=pool, timeout_s=1.0)


def task(gold: str = "3", **meta) -> Task:
    return Task(task_id="t1", prompt="p", gold=gold, domain="math", meta=meta)


def test_registered_through_the_evo_entry_point():
    pm = PluginManager()
    assert not pm.load_errors, pm.load_errors
    dom = pm.domain("math")
    assert isinstance(dom, MathDomain) and isinstance(dom, Domain)
    info = {i.name: i for i in pm.info()}
    assert info["evo_math"].distribution == "evo-plugin-math"


def test_lenient_training_verifier_pays_a_hedge_the_oracle_does_not(domain):
    v = domain.verify(task(), Completion(text=HEDGE))
    o = domain.oracle(task(), Completion(text=HEDGE))
    assert (v.reward, v.correct, v.signals["mode"]) == (1.0, True, "lenient")
    assert (o.reward, o.correct, o.signals["mode"]) == (0.0, False, "strict")
    for verdict in (v, o):
        assert verdict.signals["hedged"] and verdict.signals["answer_count"] == 2
        assert verdict.signals["strict_correct"] is False and verdict.signals["lenient_correct"] is True


def test_strict_mode_from_config_or_task(domain, pool):
    strict = MathDomain("strict", pool=pool)
    assert strict.verify(task(), Completion(text=HEDGE)).reward == 0.0
    assert domain.verify(task(verify_mode="strict"), Completion(text=HEDGE)).reward == 0.0
    configured = domain.configure({"verifier": "strict", "timeout_s": 2})
    assert configured.verifier == "strict" and configured.timeout_s == 2.0
    with pytest.raises(ValueError, match="unknown option"):
        domain.configure({"verifer": "strict"})
    with pytest.raises(ValueError, match="unknown math verifier mode 'loose'"):
        MathDomain("loose")


def test_signals_are_complete_and_encodable(domain):
    v = domain.verify(task("\\frac12"), Completion(text="so \\boxed{0.5}", truncated=True, n_tokens=9))
    assert v.reward == 1.0
    s = v.signals
    for key in ("answer_count", "extraction_path", "extraction_mode", "hedged", "truncated", "response_chars",
                "n_tokens", "boxed_count", "no_answer", "extracted", "strict_correct", "lenient_correct", "verify_ms"):
        assert key in s
    assert s["truncated"] is True and s["n_tokens"] == 9 and s["extracted"] == "0.5"
    # signals go into RolloutCompleted events: they must survive the canonical codec unchanged
    ev = RolloutCompleted(run_id="r", step=0, task_id="t1", group_id="g", policy_version=0,
                          reward=v.reward, correct=v.correct, signals=dict(s))
    assert decode_payload(RolloutCompleted.TYPE, encode_payload(ev)).signals == dict(s)


def test_no_answer(domain):
    o = domain.oracle(task(), Completion(text="I am not sure."))
    assert o.reward == 0.0 and o.signals["no_answer"] and o.signals["extraction_path"] == "none"


def test_timeout_is_an_infrastructure_error_never_a_score(domain):
    v = domain.verify(task(), Completion(text="\\boxed{9^{9^{9^{9}}}}"))
    assert isinstance(v, Verdict)
    assert v.reward is None and v.correct is None
    assert v.infra_error and v.signals["timeout"] is True and v.signals["infra_kind"] == "timeout"


def test_unparseable_gold_is_an_infrastructure_error(domain):
    v = domain.verify(task(gold="   "), Completion(text="\\boxed{3}"))
    assert v.reward is None and "gold answer is empty" in v.infra_error


def test_verify_from_threads(domain):
    def one(i: int) -> float:
        return domain.verify(task(str(i)), Completion(text=f"\\boxed{{{i}}}")).reward

    with ThreadPoolExecutor(4) as ex:
        assert list(ex.map(one, range(10))) == [1.0] * 10


def test_verify_and_oracle_share_one_pool_job(domain, pool):
    before = pool.stats["jobs"]
    comp = Completion(text="\\boxed{\\frac{7}{9}}")
    domain.verify(task("7/9"), comp)
    domain.oracle(task("7/9"), comp)
    assert pool.stats["jobs"] - before == 1


def test_batch_matches_single(domain):
    pairs = [(task(str(i % 5)), Completion(text=f"\\boxed{{{i % 3}}}")) for i in range(20)]
    batch = domain.verify_batch(pairs)
    single = [domain.verify(t, c) for t, c in pairs]
    assert [v.reward for v in batch] == [v.reward for v in single]
    assert [v.reward for v in domain.oracle_batch(pairs)] == [v.reward for v in batch]
    fresh = [(task(str(i)), Completion(text=f"\\boxed{{{i}}} again")) for i in range(30)]
    assert [v.reward for v in domain.verify_batch(fresh, progress=True)] == [1.0] * 30


def test_episode_prompt(domain):
    p = domain.build_prompt("What is $\\{1,2\\}$?")
    assert p.startswith("What is $\\{1,2\\}$?") and p.endswith("within \\boxed{}.")


# -- evo grade math ---------------------------------------------------------------------------


def test_grade_cli_verdict():
    out = grade_cli("3", HEDGE, "strict")
    assert out["reward"] == 0.0 and out["correct"] is False and out["hedged"] is True
    assert out["answers"] == ["3", "4"] and out["extracted"] == "4" and out["infra_error"] is None
    assert out["signals"]["mode"] == "strict"
    json.dumps(out)
    lenient = grade_cli("3", HEDGE, mode="lenient")
    assert lenient["reward"] == 1.0 and lenient["hedged"] is True


@pytest.mark.parametrize(
    "gold,response,mode,match",
    [
        ("3", "\\boxed{3}", "fuzzy", "unknown math verifier mode 'fuzzy'"),
        ("", "\\boxed{3}", "strict", "gold answer is empty"),
        ("$ $", "\\boxed{3}", "strict", "gold answer is empty"),
        (3, "\\boxed{3}", "strict", "gold answer must be a string"),
        ("3", None, "strict", "response must be a string"),
    ],
)
def test_grade_cli_bad_input(gold, response, mode, match):
    with pytest.raises(ValueError, match=match):
        grade_cli(gold, response, mode)


def test_hundreds_of_boxes_are_a_hedge_not_an_infra_error(domain):
    text = " ".join(f"\\boxed{{{i}}}" for i in range(200))
    o = domain.oracle(task("199"), Completion(text=text))
    assert o.infra_error is None and o.reward == 0.0
    assert o.signals["hedged"] and o.signals["answer_count"] == 200


# -- properties through the real pool -------------------------------------------------------

_pieces = st.one_of(
    st.integers(-20, 20).map(lambda i: f"\\boxed{{{i}}}"),
    st.integers(-20, 20).map(str),
    st.sampled_from([" or ", ", ", " so ", "\\text{ or }", "\\boxed{3 \\text{ or } 4}", "\\boxed{1, 2}", "\n"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gold=st.integers(-20, 20), parts=st.lists(_pieces, max_size=6))
def test_mode_invariants(domain, gold, parts):
    text = "".join(parts)
    t, c = task(str(gold)), Completion(text=text)
    strict, lenient = domain.oracle(t, c), domain.verify(t, c)
    assert strict.infra_error is None and lenient.infra_error is None
    s = strict.signals
    assert s["hedged"] == (s["answer_count"] > 1) == lenient.signals["hedged"]
    if strict.correct:  # strict implies lenient, and a strict pass is never a hedge
        assert lenient.correct and not s["hedged"]
    boxes = [p for p in parts if p.startswith("\\boxed")]
    if boxes and all(b == f"\\boxed{{{gold}}}" for b in boxes):
        assert strict.correct  # only gold, boxed (any number of times): the oracle pays
