"""Store fixtures: a fresh store per backend; PostgreSQL in a throw-away schema.

PostgreSQL tests use ``EVO_TEST_PG_URL`` (default postgresql://postgres@127.0.0.1:5432/test).
When the server is unreachable they skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import uuid

import pytest

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def pg_base_url() -> str:
    return os.environ.get("EVO_TEST_PG_URL") or PG_DEFAULT


def _pg_unreachable(reason: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is unreachable at {pg_base_url()} but CI=true expects it: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unreachable at {pg_base_url()}: {reason}")


@pytest.fixture
def pg_url():
    """A PostgreSQL store URL in a unique schema, dropped afterwards."""
    try:
        import psycopg
    except ImportError as exc:  # the postgres extra is part of the test install
        _pg_unreachable(f"psycopg missing ({exc})")
    base = pg_base_url()
    try:
        psycopg.connect(base, connect_timeout=3).close()
    except Exception as exc:
        _pg_unreachable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    schema = f"evo_test_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store/evo.sqlite"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url):
    from evo_core.store import open_store

    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def durable_url(request, tmp_path):
    """SQLite or PostgreSQL (the backends other processes can share)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store/evo.sqlite"
    return request.getfixturevalue("pg_url")
