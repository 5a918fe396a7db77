"""Logs you can trust at rest: sealed runs, recorded heads, ``evo verify --expect``."""

from __future__ import annotations

import json

import attrs
import pytest

from evo_events import GENESIS, RunFinished, RunResumed, StepCompleted, chain_hash
from evo_core.store import (
    BrokenStream,
    ConcurrencyConflict,
    ExpectedHead,
    StoreError,
    StreamHead,
    open_store,
    run_stream,
    seal_run_finished,
)
from evo_core.store.rows import chain_head
from tests.core.helpers import evo, sql_delete_tail, write_sealed_run


def _step(run_id: str, i: int) -> StepCompleted:
    return StepCompleted(run_id=run_id, step=i, policy_version=i, harness_version=0, metrics={"loss": 1.0 / i})


def test_head_is_the_last_event_and_cheap_to_ask(store):
    assert store.head("run-empty") == StreamHead(0, GENESIS)
    store.append("run-a", [_step("a", i) for i in range(1, 4)], expected_version=0)
    last = list(store.read_stream("run-a"))[-1]
    assert store.head("run-a") == StreamHead(3, last.hash) and str(store.head("run-a")) == f"3:{last.hash}"
    # the head a batch would give, computed without writing it, is the head it gives
    batch = [_step("a", i) for i in range(4, 7)]
    predicted = chain_head("run-a", 3, last.hash, batch)
    assert store.stream_version("run-a") == 3
    store.append("run-a", batch, expected_version=3)
    assert store.head("run-a") == predicted
    r6 = list(store.read_stream("run-a"))[-1]
    assert predicted.hash == chain_hash(list(store.read_stream("run-a"))[-2].hash, "run-a", 6, r6.type,
                                        r6.schema_version, r6.payload)


def test_a_sealed_run_finished_names_the_event_before_it(store):
    run_id = "r1"
    stream = run_stream(run_id)
    store.append(stream, [_step(run_id, 1), _step(run_id, 2)], expected_version=0)
    before = store.head(stream)
    # sealed in the same batch as an event before it (the loop's failed path appends two)
    extra = _step(run_id, 3)
    fin = seal_run_finished(store, RunFinished(run_id=run_id, status="failed", step=3), expected_version=2,
                            preceding=[extra])
    store.append(stream, [extra, fin], expected_version=2)
    recs = list(store.read_stream(stream))
    assert (fin.head_version, fin.head_hash) == (3, recs[2].hash) != (before.version, before.hash)
    assert store.events(stream, from_version=4).__next__() == fin  # round-trips through the codec
    rep = store.verify()
    assert rep.ok, rep.first_bad
    (s,) = rep.streams
    assert (s.events, s.head, s.finished, s.sealed) == (4, f"4:{recs[3].hash}", "failed", True)
    # a stale writer cannot seal
    with pytest.raises(ConcurrencyConflict):
        seal_run_finished(store, RunFinished(run_id=run_id, status="completed", step=3), expected_version=2)


def test_a_resumed_run_goes_on_after_its_seal_and_seals_again(store):
    run_id = "r2"
    stream = run_stream(run_id)
    store.append(stream, [_step(run_id, 1)], expected_version=0)
    stop = seal_run_finished(store, RunFinished(run_id=run_id, status="stopped", step=1), expected_version=1)
    store.append(stream, [stop], expected_version=1)
    store.append(stream, [RunResumed(run_id=run_id, from_step=1, resumed_at="2026-01-01T00:00:00Z"),
                          _step(run_id, 2)], expected_version=2)
    rep = store.verify()
    assert rep.ok and rep.streams[0].finished is None and not rep.streams[0].sealed  # open again
    done = seal_run_finished(store, RunFinished(run_id=run_id, status="completed", step=2), expected_version=4)
    store.append(stream, [done], expected_version=4)
    rep = store.verify()
    assert rep.ok and rep.streams[0].sealed and rep.streams[0].finished == "completed"


@pytest.mark.parametrize("status, after", [("completed", "step"), ("completed", "resumed"), ("stopped", "step")])
def test_events_after_a_seal_are_reported(store, status, after):
    run_id = write_sealed_run(store, steps=2, rollouts_per_step=3, status=status)
    stream = run_stream(run_id)
    n = store.stream_version(stream)
    nxt = _step(run_id, 3) if after == "step" else RunResumed(run_id=run_id, from_step=2, resumed_at="t")
    store.append(stream, [nxt], expected_version=n)
    rep = store.verify()
    assert not rep.ok and rep.bad_version == n + 1 and "added after the run was sealed" in rep.first_bad, rep


def test_a_seal_that_does_not_match_the_event_before_it_is_reported(store):
    run_id = "r3"
    stream = run_stream(run_id)
    store.append(stream, [_step(run_id, 1), _step(run_id, 2)], expected_version=0)
    wrong = RunFinished(run_id=run_id, status="completed", step=2, head_version=1,
                        head_hash=next(iter(store.read_stream(stream))).hash)
    store.append(stream, [wrong], expected_version=2)
    rep = store.verify()
    assert not rep.ok and rep.bad_version == 3 and "sealed at head 1:" in rep.first_bad


def test_unsealed_logs_still_verify(store):
    """Runs written before seals existed (and RunFinished v1 events) are reported, not failed."""
    store.append("run-old", [_step("old", 1), RunFinished(run_id="old", status="completed", step=1)],
                 expected_version=0)
    rep = store.verify()
    assert rep.ok and rep.streams[0].finished == "completed" and not rep.streams[0].sealed


def test_tail_truncation_is_detected(durable_url):
    """The issue's case: the last 300 rows of a completed run deleted with SQL."""
    store = open_store(durable_url)
    run_id = write_sealed_run(store)
    stream = run_stream(run_id)
    n = store.stream_version(stream)
    assert store.verify().ok and n > 350
    store.close()
    sql_delete_tail(durable_url, stream, n - 300)
    store = open_store(durable_url)
    rep = store.verify()
    assert not rep.ok and rep.bad_stream == stream, rep
    assert f"ending at #{n}" in rep.first_bad and f"rows end at #{n - 300}" in rep.first_bad
    assert "300 event(s) were removed from the tail" in rep.first_bad
    # and nothing can be appended on top of the cut: the evidence stays
    with pytest.raises(BrokenStream, match="rows were removed"):
        store.append(stream, [_step(run_id, 99)])
    assert store.stream_version(stream) == n - 300
    store.close()


def test_a_forged_consistent_tail_is_caught_only_by_expect(durable_url):
    store = open_store(durable_url)
    run_id = write_sealed_run(store)
    stream = run_stream(run_id)
    recorded = store.head(stream)  # what a user copies from `evo verify` or the run's last line
    store.close()
    sql_delete_tail(durable_url, stream, recorded.version - 300, also_heads=True)
    store = open_store(durable_url)
    rep = store.verify()
    assert rep.ok and rep.streams[0].finished is None and not rep.streams[0].sealed  # an open run, as documented
    rep = store.verify([stream], expect=ExpectedHead.parse(str(recorded)))
    assert not rep.ok and "300 event(s) are missing from the tail" in rep.first_bad
    rep = store.verify([stream], expect=ExpectedHead.parse(recorded.hash[:16]))
    assert not rep.ok and "no event of the stream has the expected head" in rep.first_bad
    store.close()


def test_expect_names_events_added_after_the_recorded_head(store):
    run_id = "r4"
    stream = run_stream(run_id)
    store.append(stream, [_step(run_id, i) for i in range(1, 6)], expected_version=0)
    recorded = store.head(stream)
    assert store.verify([stream], expect=ExpectedHead.parse(str(recorded))).ok
    assert store.verify([stream], expect=ExpectedHead.parse(recorded.hash[:12])).ok
    store.append(stream, [_step(run_id, 6), _step(run_id, 7)], expected_version=5)
    rep = store.verify([stream], expect=ExpectedHead.parse(str(recorded)))
    assert not rep.ok and "2 event(s) were added after it" in rep.first_bad
    store.append("run-other", [_step("other", 1)], expected_version=0)
    with pytest.raises(StoreError, match="one stream"):
        store.verify(expect=ExpectedHead.parse(str(recorded)))


@pytest.mark.parametrize("text", ["abc", "5:" + "g" * 64, "0:" + "a" * 64, "x:" + "a" * 64, "a" * 65])
def test_bad_expected_heads_are_one_clear_line(text):
    with pytest.raises(StoreError, match="--expect"):
        ExpectedHead.parse(text)


def test_verify_cli_reports_heads_and_checks_expect(tmp_path):
    url = f"sqlite:///{tmp_path}/s/evo.sqlite"
    store = open_store(url)
    run_id = write_sealed_run(store, steps=2, rollouts_per_step=3)
    head = store.head(run_stream(run_id))
    store.close()
    r = evo("verify", "--store", url)
    assert r.returncode == 0, r.stderr
    assert f"head {head}" in r.stdout and "sealed (completed)" in r.stdout
    r = evo("verify", run_id, "--store", url, "--expect", str(head))
    assert r.returncode == 0 and "matches the expected" in r.stdout, r.stderr
    data = json.loads(evo("verify", "--store", url, "--json").stdout)
    assert data["streams"][0]["head"] == str(head) and data["streams"][0]["sealed"] is True
    r = evo("verify", run_id, "--store", url, "--expect", f"{head.version + 5}:{'ab' * 32}")
    assert r.returncode == 1 and "missing from the tail" in r.stderr and "Traceback" not in r.stderr
    r = evo("verify", "--store", url, "--expect", str(head))
    assert r.returncode == 2 and "--expect needs a RUN" in r.stderr
    r = evo("verify", run_id, "--store", url, "--expect", "nothex")
    assert r.returncode == 2 and "VERSION:HASH" in r.stderr and "Traceback" not in r.stderr
    sql_delete_tail(url, run_stream(run_id), head.version - 5)
    r = evo("verify", "--store", url)
    assert r.returncode == 1 and "5 event(s) were removed from the tail" in r.stderr


def test_run_finished_v2_round_trips_and_v1_upcasts_unsealed():
    from evo_events import decode_payload, encode_payload

    fin = RunFinished(run_id="r", status="completed", step=3, head_version=7, head_hash="ab" * 32)
    assert RunFinished.VERSION == 2 and decode_payload(fin.TYPE, encode_payload(fin), 2) == fin
    v1 = {k: v for k, v in json.loads(encode_payload(attrs.evolve(fin, head_version=None, head_hash=None))).items()
          if not k.startswith("head_")}
    old = decode_payload(fin.TYPE, json.dumps(v1).encode(), 1)
    assert (old.head_version, old.head_hash) == (None, None) and old.status == "completed"


def test_verify_on_a_live_store_does_not_mistake_a_new_append_for_tampering(durable_url):
    """The recorded heads are read first, the rows after: an append in between is no problem."""
    store = open_store(durable_url)
    stream = run_stream("live")
    store.append(stream, [_step("live", i) for i in range(1, 4)], expected_version=0)
    before = store.backend.recorded_heads()
    store.append(stream, [_step("live", 4)], expected_version=3)  # lands between the two reads
    real = store.backend.recorded_heads
    calls = iter([before])
    store.backend.recorded_heads = lambda: next(calls, None) or real()
    rep = store.verify()
    assert rep.ok, rep.first_bad
    assert rep.streams[0].recorded_head == str(before[stream]) and rep.streams[0].head == str(store.head(stream))
    store.close()
