"""Codec, fast codec and upcasters: property tests and golden fixtures."""

from __future__ import annotations

import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any, Optional, Union

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_events import (
    GENESIS,
    BlobRef,
    Emitter,
    Event,
    EvalCompleted,
    InterventionProposed,
    RolloutCompleted,
    RunStarted,
    StepCompleted,
    chain_hash,
    decode_payload,
    encode_payload,
    event_type,
    register_upcaster,
    upcast,
)
from evo_events.codec import CodecError
from evo_events.upcasters import UpcastError
from evo_core.store import fastcodec
from evo_core.store.fastcodec import encode_many, encode_run, fast_encode_payload
from evo_core.store.rows import chain_head, encode_rows, unpack_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "events"

text = st.text(max_size=12)  # any unicode, control characters included
ident = st.text(alphabet="abcdef0123456789", min_size=1, max_size=32)


def json_values(finite: bool):
    floats = st.floats(allow_nan=not finite, allow_infinity=not finite)
    scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | floats | text
    containers = (lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4))
    if not finite:  # also keys the canonical codec must stringify, at any depth
        keys = text | st.integers(-3, 3) | st.booleans() | st.none() | st.floats(-2, 2)
        containers = (lambda c: st.lists(c, max_size=4) | st.tuples(c, c) | st.dictionaries(keys, c, max_size=4))
    return st.recursive(scalars, containers, max_leaves=12)


def events(finite: bool):
    val = json_values(finite)
    d = st.dictionaries(text, val, max_size=5)
    num = st.floats(allow_nan=not finite, allow_infinity=not finite)
    emitter = st.builds(Emitter, text, text)
    common = dict(run_id=text, event_id=ident, caused_by=st.lists(ident, max_size=3).map(tuple), emitted_by=emitter)
    blob = st.none() | st.builds(BlobRef, st.text("0123456789abcdef", min_size=64, max_size=64),
                                 st.integers(0, 2**40), text)
    return st.one_of(
        st.builds(RolloutCompleted, step=st.integers(0, 10**6), task_id=text, group_id=text,
                  policy_version=st.integers(0, 1000), reward=st.none() | num, correct=st.none() | st.booleans(),
                  strict_correct=st.none() | st.booleans(), split=text, infra_error=st.none() | text,
                  truncated=st.booleans(), length=st.integers(0, 10**5), response_preview=text, trajectory=blob,
                  signals=d, **common),
        st.builds(StepCompleted, step=st.integers(0, 10**6), policy_version=st.integers(0, 10**3),
                  harness_version=st.integers(0, 100), metrics=st.dictionaries(text, st.none() | num, max_size=5),
                  **common),
        st.builds(RunStarted, config=d, config_hash=text, seed=st.integers(-(2**63), 2**63),
                  harness_mode=st.sampled_from(["fixed", "evolving"]), code_version=text, started_at=text,
                  parent_run=st.none() | text, **common),
        st.builds(InterventionProposed, step=st.integers(0, 10**6), kind=text, name=text, params=d,
                  targets=st.lists(text, max_size=3).map(tuple), prediction=d, rationale=text, proposer=text,
                  fingerprint=text, skill_id=st.none() | text, **common),
        st.builds(EvalCompleted, step=st.integers(0, 10), policy_version=st.integers(0, 10), split=text,
                  n=st.integers(0, 100), metrics=st.dictionaries(text, st.none() | num, max_size=4),
                  item_scores=st.dictionaries(text, st.floats(allow_nan=False, allow_infinity=False), max_size=4),
                  **common),
    )


@settings(max_examples=300, deadline=None)
@given(events(finite=False))
def test_fast_codec_is_byte_identical_to_the_canonical_codec(ev):
    assert fast_encode_payload(ev) == encode_payload(ev)


class _Colour(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Tag(str):
    pass


# Values orjson writes but the canonical codec writes differently or rejects: the fast
# codec must give the canonical bytes or the canonical error, never orjson's own answer.
AWKWARD = [
    1e-05, -2.5e-07, 5e-324, 9.999999999999999e-05, 1e-4, 0.0, -0.0, 1e16, 1e22, 123456.789,
    2**63, -(2**63), 2**64, -(2**63) - 1, 10**30,
    uuid.UUID(int=7), _Colour.RED, _Level.HIGH, _Tag("x"), {_Tag("k"): 1}, {1: "int key"}, {True: 1},
    [1e-05], (1, [2, {"x": 3e-06}]), {"nested": {"tiny": 1e-9, "ok": 0.5}}, float("nan"), float("inf"),
    "\ud800 lone surrogate", "\x00\x1f\x7f\u2028 é 😀", object(),
]


@pytest.mark.parametrize("value", AWKWARD, ids=repr)
def test_fast_codec_gives_the_canonical_answer_for_awkward_values(value):
    for ev in (RolloutCompleted(run_id="r", event_id="e", step=1, task_id="t", group_id="g", policy_version=0,
                                reward=value if type(value) is float else 0.5, signals={"v": value}),
               StepCompleted(run_id="r", event_id="e", step=1, policy_version=1, harness_version=0,
                             metrics={"m": value})):
        try:
            want = encode_payload(ev)
        except CodecError as exc:
            with pytest.raises(CodecError) as got:
                fast_encode_payload(ev)
            assert str(got.value) == str(exc)
        else:
            assert fast_encode_payload(ev) == want


def test_fast_codec_takes_the_orjson_path_for_plain_events():
    from evo_core.store import fastcodec

    assert fastcodec._orjson is not None  # a declared dependency: without it this would test the stdlib path
    ev = RolloutCompleted(run_id="r", event_id="e", step=1, task_id="t", group_id="g", policy_version=0, reward=1.0,
                          signals={"answer_count": 2, "entropy": 0.25, "hedged": True, "path": ["a", "b"]})
    assert fastcodec.first_path(RolloutCompleted)(ev) == encode_payload(ev)
    # and a run of them is one orjson call whose list splits back into the events' bytes
    evs = [attrs.evolve(ev, event_id=f"e{i}", step=i) for i in range(5)]
    run, start, sep = fastcodec._run_path(RolloutCompleted)
    out = run(evs)
    assert out.count(sep) == 4 and json.loads(out) == [json.loads(encode_payload(e)) for e in evs]
    assert encode_run(RolloutCompleted, evs) == [encode_payload(e) for e in evs]


@settings(max_examples=200, deadline=None)
@given(st.lists(events(finite=False), max_size=12), st.randoms(use_true_random=False))
def test_encode_many_is_byte_identical_to_encoding_one_by_one(evs, rnd):
    # runs of one class (what the one-orjson-call path takes) as well as mixed classes
    evs = evs + [evs[0]] * rnd.randint(0, 3) if evs else evs
    evs.sort(key=lambda e: type(e).__name__) if rnd.random() < 0.5 else None
    assert encode_many(evs) == [encode_payload(e) for e in evs]


@settings(max_examples=100, deadline=None)
@given(st.lists(events(finite=True), min_size=2, max_size=6))
def test_encode_run_takes_one_orjson_call_for_plain_events(evs):
    runs = [ev for ev in evs if type(ev) is type(evs[0])]
    assert encode_run(type(runs[0]), runs) == [encode_payload(e) for e in runs]


def _nested_separator_run():
    # a value that holds the separator between two events' bytes: the split must notice
    sig = {"x": [{"caused_by": 1}, {"caused_by": 2}], "s": '},{"caused_by":'}
    return [RolloutCompleted(run_id="r", event_id=f"e{i}", step=i, task_id="t", group_id="g", policy_version=0,
                             reward=0.5, signals=sig if i == 1 else {}) for i in range(3)]


@pytest.mark.parametrize("evs", [
    _nested_separator_run(),
    [RolloutCompleted(run_id="r", event_id="a", step=1, task_id="t", group_id="g", policy_version=0, reward=r)
     for r in (0.5, 1e-05, float("nan"), 2.0)],  # one value the run path refuses: the whole run goes one by one
    [StepCompleted(run_id="r", event_id="a", step=1, policy_version=1, harness_version=0, metrics={"m": v})
     for v in (1.0, 2**70, None)],  # an int orjson cannot write
], ids=["nested-separator", "tiny-float", "big-int"])
def test_encode_many_falls_back_exactly(evs):
    assert encode_many(evs) == [encode_payload(e) for e in evs]


def test_encode_run_in_batches_falls_back_batch_by_batch(monkeypatch):
    monkeypatch.setattr(fastcodec, "RUN_BATCH", 2)
    evs = [RolloutCompleted(run_id="r", event_id=f"e{i}", step=i, task_id="t", group_id="g", policy_version=0,
                            reward=1e-05 if i == 2 else 0.5 * i) for i in range(7)]
    assert encode_run(RolloutCompleted, evs) == [encode_payload(e) for e in evs]


def _reference_rows(stream, version, prev, evs):
    out = []
    for ev in evs:
        version += 1
        p = encode_payload(ev)
        prev = chain_hash(prev, stream, version, ev.TYPE, ev.VERSION, p)
        out.append((version, prev, p))
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(events(finite=False), min_size=1, max_size=8), text, st.integers(0, 10**9))
def test_the_inlined_chain_matches_the_reference_chain_hash(evs, stream, version):
    prev = GENESIS
    rows = [r for chunk in encode_rows(stream, "k", version, prev, evs, b"1.5") for r in chunk]
    want = _reference_rows(stream, version, prev, evs)
    assert [(r[1], unpack_state(r[3], stream, r[1])[0], unpack_state(r[3], stream, r[1])[4]) for r in rows] == want
    assert [r[2] for r in rows] == [ev.TYPE for ev in evs]
    head = chain_head(stream, version, prev, evs)
    assert (head.version, head.hash) == want[-1][:2]


def test_the_chain_spans_chunks_and_class_runs(monkeypatch):
    monkeypatch.setattr("evo_core.store.rows.CHUNK", 3)
    evs = [StepCompleted(run_id="r", event_id=f"s{i}", step=i, policy_version=1, harness_version=0, metrics={}) if i % 4 == 0
           else RolloutCompleted(run_id="r", event_id=f"r{i}", step=i, task_id="t", group_id="g", policy_version=0,
                                 reward=0.25 * i) for i in range(11)]
    chunks = list(encode_rows("run-x", "k", 5, GENESIS, evs, b"2.0"))
    assert [len(c) for c in chunks] == [3, 3, 3, 2]
    want = _reference_rows("run-x", 5, GENESIS, evs)
    assert [unpack_state(r[3], "run-x", r[1])[0] for c in chunks for r in c] == [w[1] for w in want]


def test_bad_event_ids_are_refused_wherever_they_are_in_a_run():
    from evo_core.store.records import StoreError

    for bad in ("has space", "two\nlines", 7):
        evs = [RolloutCompleted(run_id="r", event_id=e, step=1, task_id="t", group_id="g", policy_version=0,
                                reward=0.5) for e in ("ok1", bad, "ok-2")]
        with pytest.raises(StoreError, match="event id"):
            list(encode_rows("s", "k", 0, GENESIS, evs, b"1"))
    fine = [RolloutCompleted(run_id="r", event_id=e, step=1, task_id="t", group_id="g", policy_version=0, reward=0.5)
            for e in ("a-b", "x_y:z", "")]
    assert len(list(encode_rows("s", "k", 0, GENESIS, fine, b"1"))[0]) == 3


# A class written without ``from __future__ import annotations``: attrs then holds real types
# (``typing.Optional[float]``, ``dict[str, typing.Any]``), not their text.
_plain_fields = {"score": attrs.field(type=Optional[float]), "tags": attrs.field(type=tuple[str, ...], default=()),
                 "extra": attrs.field(type=dict[str, Any], factory=dict), "who": attrs.field(type=Optional[Emitter],
                                                                                           default=None),
                 "maybe": attrs.field(type=Union[int, None], default=None), "n": attrs.field(type=int, default=0)}
PlainAnnotations = event_type("evotest.PlainAnnotations", version=1)(
    attrs.make_class("PlainAnnotations", _plain_fields, bases=(Event,), frozen=True, kw_only=True))


@pytest.mark.parametrize("annotation, text", [
    ("Optional[float]", "Optional[float]"), (Optional[float], "Optional[float]"), (float, "float"),
    ("float | None", "Optional[float]"), (Union[None, str], "Optional[str]"), (dict[str, Any], "dict[str,Any]"),
    (tuple[str, ...], "tuple[str,...]"), ("tuple[str, ...]", "tuple[str,...]"), (Emitter, "Emitter"),
    (Optional[dict[str, Any]], "Optional[dict[str,Any]]"), (Union[int, str, None], "int|str|None"),
])
def test_annotation_text_is_the_same_with_and_without_string_annotations(annotation, text):
    assert fastcodec._annotation_text(annotation) == text


def test_a_class_without_string_annotations_takes_the_inline_checks():
    fields = {a.name: a.type for a in attrs.fields(PlainAnnotations)}
    assert fastcodec._orjson_field(fields["score"], "v")[0]  # a guard, not the generic attrs path
    assert fastcodec._orjson_field(fields["maybe"], "v")[0]
    assert fastcodec._run_field(fields["extra"], "v", 0)[0] == "v.__class__ is dict"
    evs = [PlainAnnotations(run_id="r", event_id=f"e{i}", score=s, tags=("a",), extra={"k": [1, s]},
                            who=Emitter("x", "1") if i else None, maybe=i)
           for i, s in enumerate((0.5, None, 1e-05, 3.0))]
    assert encode_many(evs) == [encode_payload(e) for e in evs]
    assert encode_many(evs[:2]) == [encode_payload(e) for e in evs[:2]]
    assert [fast_encode_payload(e) for e in evs] == [encode_payload(e) for e in evs]


@settings(max_examples=200, deadline=None)
@given(events(finite=True))
def test_codec_round_trips(ev):
    data = encode_payload(ev)
    back = decode_payload(ev.TYPE, data, ev.VERSION)
    assert back == ev
    assert encode_payload(back) == data  # canonical: re-encoding gives the same bytes


@settings(max_examples=100, deadline=None)
@given(events(finite=False))
def test_encoding_is_canonical_even_with_non_finite_floats(ev):
    data = encode_payload(ev)
    json.loads(data, parse_constant=lambda c: pytest.fail(f"non-JSON token {c} in {data!r}"))
    back = decode_payload(ev.TYPE, data, ev.VERSION)
    assert encode_payload(back) == data


# --- upcasters ----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_golden_upcaster_fixtures(fixture):
    spec = json.loads(fixture.read_text())
    from evo_events import event_class

    cls = event_class(spec["type"])
    up = upcast(spec["type"], spec["stored_schema_version"], cls.VERSION, spec["stored"])
    ev = decode_payload(spec["type"], json.dumps(spec["stored"]).encode(), spec["stored_schema_version"])
    assert json.loads(encode_payload(ev)) == spec["expected"]
    # the upcaster's own output holds exactly the expected data (defaults may be filled by the schema)
    assert {k: v for k, v in spec["expected"].items() if k in up} == up


@event_type("evotest.Widget", version=3)
@attrs.frozen(kw_only=True)
class Widget(Event):
    size_mm: float
    colour: str = "grey"
    tags: tuple[str, ...] = ()


@register_upcaster("evotest.Widget", 1)
def _widget_1_2(d: dict) -> dict:
    out = dict(d)
    out["size_mm"] = out.pop("size_cm") * 10
    return out


@register_upcaster("evotest.Widget", 2)
def _widget_2_3(d: dict) -> dict:
    out = dict(d)
    out["tags"] = sorted(out.pop("labels", {}))
    return out


v1_widgets = st.fixed_dictionaries(
    {"run_id": text, "event_id": ident, "size_cm": st.floats(-1e6, 1e6, allow_nan=False)},
    optional={"colour": text, "labels": st.dictionaries(text, st.booleans(), max_size=3)})


@settings(max_examples=100, deadline=None)
@given(v1_widgets)
def test_upcasters_compose(d):
    snapshot = json.dumps(d, sort_keys=True)
    composed = upcast("evotest.Widget", 1, 3, d)
    assert composed == _widget_2_3(_widget_1_2(d))
    assert upcast("evotest.Widget", 2, 3, upcast("evotest.Widget", 1, 2, d)) == composed
    assert json.dumps(d, sort_keys=True) == snapshot  # the input is never mutated
    ev = decode_payload("evotest.Widget", json.dumps(d).encode(), 1)
    assert math.isclose(ev.size_mm, d["size_cm"] * 10) and ev.tags == tuple(sorted(d.get("labels", {})))


def test_missing_upcaster_and_future_versions_are_clear():
    with pytest.raises(UpcastError, match="no upcaster from schema v0"):
        upcast("evotest.Widget", 0, 3, {})
    with pytest.raises(LookupError, match="schema v9"):
        decode_payload("evotest.Widget", b"{}", 9)
