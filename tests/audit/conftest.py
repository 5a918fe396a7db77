"""Fixtures for the audit/replay/report/tail tests: generated logs and a test diagnostic."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from evo_core.testing import run_evo

import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def evo(*args: str, env: dict | None = None, timeout: int = 120, cwd=None) -> subprocess.CompletedProcess:
    """Run the ``evo`` CLI in a fresh process (what a user sees)."""
    return run_evo(*args, env=env, timeout=timeout, cwd=cwd or ROOT)


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path}/store/evo.sqlite"


@pytest.fixture
def sqlite_run(sqlite_url):
    """(url, run_id): a 20-step generated run with trajectory blobs in SQLite."""
    from evo_core.store import open_store
    from evo_core.synthetic import generate_run

    st = open_store(sqlite_url)
    run_id = generate_run(st, steps=20, rollouts_per_step=8, trajectories=True)
    st.close()
    return sqlite_url, run_id


@pytest.fixture
def pg_url():
    """A PostgreSQL store URL in a throw-away schema; skips when unreachable, fails under CI=true."""
    base = os.environ.get("EVO_TEST_PG_URL") or PG_DEFAULT

    def unreachable(reason):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL unreachable at {base} but CI=true expects it: {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL unreachable at {base}: {reason}")

    try:
        import psycopg
    except ImportError as exc:
        unreachable(f"psycopg missing ({exc})")
    try:
        psycopg.connect(base, connect_timeout=3).close()
    except Exception as exc:
        unreachable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    schema = f"evo_audit_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def cf_plugins(evo_plugin):
    """A plugin manager with the test diagnostic ``multi_rewarded`` registered."""
    from tests.audit import _plugins

    return evo_plugin(_plugins, name="audit-test-plugins")
