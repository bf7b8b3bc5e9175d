"""The PostgreSQL tests run against a real server: a fresh database per test module, created
from ``X402LAB_TEST_POSTGRES_URL`` (default ``postgresql:///postgres``: the local socket,
peer authentication; ``.ci/postgres-setup.sh`` makes that work) and dropped at the end.

Without psycopg or a server these tests skip saying why; under ``CI=true`` they fail.
``support.postgres`` holds the helpers."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support import postgres


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The URL of a role that may create databases (the tests' server)."""
    problem = postgres.server_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return postgres.ADMIN_URL


@pytest.fixture(scope="module")
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A database of this test module (``x402lab_test_<random>``); its URL."""
    name = postgres.create_database()
    try:
        yield postgres.database_url(name)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """The module's database, emptied for this test (no tables, no schema version)."""
    postgres.empty(pg_database)
    return pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a ledger lives, once per backend: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("pg_url"))
