"""Fixtures of the Dask tests: one real LocalCluster (two worker processes) per module, the
test wallet's key in an environment variable the workers inherit, and labs on an emulator
the test can inspect (its chain)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dask_cluster import KEY_VARIABLE, local_cluster, require

import x402lab as xl
from x402lab.emulator.server import RunningEmulator


@pytest.fixture(scope="module")
def wallet_key() -> Iterator[str]:
    """A fresh key in ``KEY_VARIABLE``, set before the cluster starts so its workers (and the
    ones their nannies restart) inherit it; the tests never print it."""
    key = "0x" + secrets.token_hex(32)
    before = os.environ.get(KEY_VARIABLE)
    os.environ[KEY_VARIABLE] = key
    yield key
    if before is None:
        os.environ.pop(KEY_VARIABLE, None)
    else:
        os.environ[KEY_VARIABLE] = before


@pytest.fixture(scope="module")
def cluster(wallet_key: str) -> Iterator[Any]:
    """A distributed Client on a LocalCluster of two single-threaded worker processes,
    shared by the module (starting one takes seconds on two cores)."""
    require("dask.dataframe")
    with local_cluster() as client:
        yield client


@pytest.fixture
def team_lab(tmp_path: Path, wallet_key: str) -> Iterator[Callable[..., Any]]:
    """``team_lab(emulator, usd=..., ledger=..., user=...)``: a sync Lab whose wallet the
    workers can load (``Wallet.from_env``), with a named budget; closed after the test."""
    labs: list[Any] = []

    def factory(
        emulator: RunningEmulator,
        *,
        usd: float | None = 50.0,
        ledger: Any = None,
        name: str | None = None,
        user: str | None = None,
    ) -> Any:
        lab = xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_env(KEY_VARIABLE),
            budget=xl.Budget(usd=usd, name=name or f"team-{secrets.token_hex(3)}"),
            ledger=xl.Ledger(
                ledger if ledger is not None else tmp_path / "ledger.sqlite", user=user
            ),
            chain_rpc_url=emulator.chain_url,
        )
        labs.append(lab)
        return lab

    yield factory
    for lab in labs:
        lab.close()
