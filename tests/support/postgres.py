"""Helpers of the PostgreSQL tests: the server, throwaway databases and roles, and payments
made through the Ledger's API (``from support.postgres import ...``)."""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

from support import ledger as ledger_support
from support.ledger import meta

from x402lab.ledger import Ledger

ADMIN_URL = os.environ.get("X402LAB_TEST_POSTGRES_URL", "postgresql:///postgres")


def server_problem() -> str | None:
    """Why the tests cannot run here (None when they can)."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        return 'psycopg is not installed: pip install "x402lab[postgres]"'
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=5).close()
    except psycopg.Error as exc:
        return (
            f"no PostgreSQL server at X402LAB_TEST_POSTGRES_URL ({_hide(ADMIN_URL)}):"
            f" {str(exc).strip()} (.ci/postgres-setup.sh starts one)"
        )
    return None


def admin(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement as the admin role, outside any transaction; its rows."""
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as connection:
        cursor = connection.execute(sql, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def create_database() -> str:
    name = f"x402lab_test_{secrets.token_hex(4)}"
    admin(f"CREATE DATABASE {name}")
    return name


def drop_database(name: str) -> None:
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def database_url(name: str, url: str = ADMIN_URL) -> str:
    """``url`` (the admin's) pointed at the database ``name``."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params["dbname"] = name
    if "://" not in url:
        return make_conninfo(**params)
    user = f"{params['user']}@" if params.get("user") else ""
    password = params.get("password")
    if password:
        user = f"{params['user']}:{password}@"
    host = params.get("host", "")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{name}"


def empty(url: str) -> None:
    """Drop every table of the database at ``url`` (a new public schema)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the database at ``url``, read directly (not through x402lab)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        cursor = connection.execute(sql, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_port() -> int:
    """The port the test server listens on (for connections over TCP to 127.0.0.1)."""
    [(port,)] = admin("SELECT current_setting('port')::int")
    return int(port)


def _hide(url: str) -> str:
    import re

    return re.sub(r"(://[^/:@]*):[^@/]*@", r"\1@", url)


# -- payments made through the Ledger's API ------------------------------------------------


def signed(ledger: Ledger, request_key: str, amount: int = 10_000, **kw: Any) -> int:
    """``support.ledger.signed``, its signed payload kept (to be sent again)."""
    return ledger_support.signed(ledger, request_key, amount, payload="signed-payload", **kw)


def settled(ledger: Ledger, request_key: str, amount: int = 10_000, **kw: Any) -> int:
    """``support.ledger.settled``, its signed payload kept."""
    return ledger_support.settled(ledger, request_key, amount, payload="signed-payload", **kw)


# -- work for other processes (spawned: they import this module by name) -------------------


def reserve_many(url: str, budget: str, cap: int, prices: list[int], start: Any) -> None:
    """One process of the race: wait for ``start``, then reserve each price from ``budget``
    (``cap``), going on after a refusal."""
    import x402lab as xl

    ledger = Ledger(url, user=f"worker-{os.getpid()}")
    shared = xl.Budget(usd=cap / 1_000_000, name=budget).bind(ledger)
    start.wait(60)
    for price in prices:
        try:
            shared.reserve(price, meta())
        except xl.BudgetExceeded:
            pass
    ledger.close()


def open_ledger(url: str) -> None:
    Ledger(url).close()
