"""``RunIndex`` numbers events by their stored versions, also after a row went missing."""

from __future__ import annotations

import sqlite3

from evo_events import Promoted
from evo_core.audit import RunIndex, audit_run
from evo_core.store import open_store, run_stream
from evo_core.store.es import DEFAULT_TABLE, stream_uuid
from tests.audit.conftest import evo


def _delete_row(url: str, stream: str, version: int) -> None:
    conn = sqlite3.connect(url[len("sqlite:///"):])
    conn.execute(f"DELETE FROM {DEFAULT_TABLE} WHERE originator_id = ? AND originator_version = ?",
                 (stream_uuid(stream).hex, version))
    conn.commit()
    conn.close()


def test_audit_names_stored_versions_after_a_deleted_row(sqlite_run):
    url, run_id = sqlite_run
    stream = run_stream(run_id)
    store = open_store(url)
    promos = [r for r in store.read_stream(stream) if r.type == Promoted.TYPE]
    first = promos[0]
    gone = first.version - 20  # a rollout of the step before the first promotion
    store.close()
    _delete_row(url, stream, gone)
    store = open_store(url, read_only=True)
    stored = {r.event_id: r.version for r in store.read_stream(stream)}
    index = RunIndex(store, run_id)
    assert index.head_version == max(stored.values()) == len(index.records) + 1
    report = audit_run(store, run_id, index=index)
    for chain in report.chains:
        assert chain.decision["version"] == stored[chain.decision["id"]]
        for row in chain.diagnoses + chain.evidence + chain.backtests + chain.evals:
            assert row["version"] == stored[row["id"]]
        assert set(chain.shown_versions) <= set(stored.values())
    # the chain check names the event where the gap is, by its stored version and id
    br = index.verify_range(0)
    assert br is not None and br.version == gone + 1 and br.event_id == index.records[gone - 1].event_id
    assert stored[br.event_id] == gone + 1 and "missing" in br.reason
    # a decision whose shown events all come after the gap is still vouched for, from its first shown event
    last = report.chains[-1].verification
    if min(report.chains[-1].shown_versions) > gone:
        assert last.verified and last.first_version == min(report.chains[-1].shown_versions)
        assert last.head_version == index.head_version
    else:
        assert not last.verified and last.bad_version == gone + 1
    r = evo("audit", run_id, "--store", url, "--json")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr
