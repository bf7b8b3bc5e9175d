"""Helpers of the Dask tests (``from support.dask_cluster import ...``)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from x402lab.emulator.server import RunningEmulator

#: The environment variable the workers read the test wallet's key from.
KEY_VARIABLE = "X402LAB_DASK_TEST_KEY"
EMBED = "text-embedding-3-small"
CHEAP = "zai-org-glm-4.7-flash"  # every short chat costs the minimum charge


def require(module: str) -> Any:
    """Import a declared test dependency: a skip on a developer's machine, a failure under
    CI=true (where it must be installed)."""
    try:
        return __import__(module)
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{module} is a declared test dependency and missing under CI: {exc}")
        pytest.skip(f"{module} is not installed (pip install 'x402lab[dask]')")


def texts(n: int, tag: str) -> list[str]:
    """n distinct short texts, distinct from any other ``tag``'s."""
    return [f"{tag} note {i}: river stone market garden" for i in range(n)]


def transfers_per_key(lab: Any, emulator: RunningEmulator) -> Counter[str | None]:
    """How many chain transfers settled for each request key (through the ledger's nonces,
    whichever process signed them)."""
    key_of = {
        row["nonce"].lower(): row["request_key"]
        for row in lab.ledger.rows()
        if row["nonce"] is not None
    }
    return Counter(key_of.get(t.nonce.lower()) for t in emulator.chain.transfers())


def when(
    condition: Callable[[], bool], action: Callable[[], None], timeout_s: float
) -> threading.Thread:
    """Run ``action`` in a thread once ``condition`` holds (polled); gives up after
    ``timeout_s``."""

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                action()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


#: A role that may create databases on the tests' PostgreSQL server (as in tests/postgres).
POSTGRES_ADMIN_URL = os.environ.get("X402LAB_TEST_POSTGRES_URL", "postgresql:///postgres")


def postgres_database() -> tuple[str, Callable[[], None]]:
    """A fresh PostgreSQL database on the tests' server: its URL and how to drop it. A skip
    without psycopg or a server; a failure under CI=true."""
    psycopg = require("psycopg")
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        problem = f"no PostgreSQL server at X402LAB_TEST_POSTGRES_URL: {str(exc).strip()}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(problem)
        pytest.skip(problem)
    name = f"x402lab_dask_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
    params = psycopg.conninfo.conninfo_to_dict(POSTGRES_ADMIN_URL)
    params["dbname"] = name
    url = (
        "postgresql://"
        + (f"{params['user']}@" if params.get("user") else "")
        + f"{params.get('host', '')}"
        + (f":{params['port']}" if params.get("port") else "")
        + f"/{name}"
    )

    def drop() -> None:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return url, drop


@contextlib.contextmanager
def local_cluster(threads: int = 1) -> Iterator[Any]:
    """A distributed Client on a LocalCluster of two worker processes (``threads`` each).

    The workers fork from one server process that imported distributed, pandas and numpy once
    (``forkserver``) instead of each importing them again (spawned, about 2 s of CPU a
    worker). A forked worker has the fork server's environment, not this process's, so the
    test wallet's key (``KEY_VARIABLE``) reaches it through its nanny, as it would reach a
    worker started where the variable is set.
    """
    distributed = require("distributed")
    import dask

    env = {KEY_VARIABLE: os.environ[KEY_VARIABLE]} if KEY_VARIABLE in os.environ else {}
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        # The scheduler's HTTP server on a free port: with None it still takes 8787, and
        # fails when another cluster on this machine holds it.
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=threads, processes=True, dashboard_address=":0",
            env=env,
        )  # fmt: skip
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
