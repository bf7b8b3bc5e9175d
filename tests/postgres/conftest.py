"""The PostgreSQL tests run against a real server: a fresh database per test module, created
from ``X402LAB_TEST_POSTGRES_URL`` (default ``postgresql:///postgres``: the local socket,
peer authentication; ``.ci/postgres-setup.sh`` makes that work) and dropped at the end.

Without psycopg or a server these tests skip saying why; under ``CI=true`` they fail.
``pg_support`` holds the helpers (on sys.path from here)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

_HERE = os.path.dirname(__file__)
if _HERE not in sys.path:
    sys.path.append(_HERE)

import pg_support  # noqa: E402


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The URL of a role that may create databases (the tests' server)."""
    problem = pg_support.server_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return pg_support.ADMIN_URL


@pytest.fixture(scope="module")
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A database of this test module (``x402lab_test_<random>``); its URL."""
    name = pg_support.create_database()
    try:
        yield pg_support.database_url(name)
    finally:
        pg_support.drop_database(name)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """The module's database, emptied for this test (no tables, no schema version)."""
    pg_support.empty(pg_database)
    return pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a ledger lives, once per backend: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("pg_url"))
