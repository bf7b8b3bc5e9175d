"""A Dask worker SIGKILLed in the middle of a ``batch_embed`` loses at most the answers it
still had on the wire: each worker stores its answers with their settlements in the shared
ledger (SQLite or PostgreSQL), so a re-run in a fresh cluster shows at most the killed
worker's in-flight requests (``concurrency`` per worker thread) as texts paid without a
vector, and pays nothing again. The killed run's output folder reads as one table, with
``pq.read_table`` and ``dd.read_parquet``. (With answers kept apart for up to 0.2 s, as they once
were, SQLite runs of it with 400 and 800 texts lost 8, 12 and 20: more the faster the
workers pay, so this bound catches that only on a machine that is not overloaded.)"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.dask_cluster import (
    EMBED,
    local_cluster,
    postgres_database,
    require,
    texts,
    transfers_per_key,
    when,
)

import x402lab as xl

require("dask.dataframe")
distributed = require("distributed")
import dask.dataframe as dd  # noqa: E402

TEXTS = 320
PARTITIONS = 8
CONCURRENCY = 8
THREADS = 1  # per worker: the killed worker has at most CONCURRENCY * THREADS on the wire
WIDTH = 1536  # the embedding model's published width
LOST = ("paid_not_stored", "unknown")  # paid (or maybe paid) with no stored vector


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The shared ledger: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield tmp_path / "ledger.sqlite"
        return
    url, drop = postgres_database()
    try:
        yield url
    finally:
        drop()


def _settled(lab: Any) -> int:
    """Settled payments in the ledger (one per text: a request carries one)."""
    found = lab.ledger.db.read_one("SELECT COUNT(*) FROM payments WHERE status = 'settled'")
    return int(found[0]) if found else 0


def _run_and_kill_a_worker(lab: Any, series: Any, out: Path) -> tuple[int, pd.DataFrame]:
    """The batch on a cluster of its own into ``out`` (a folder of partition files), one
    worker SIGKILLed halfway through its second partition; returns the settled count at the
    kill and the rows, read back from the folder both ways (Dask runs the dead worker's
    partitions, the finished one too, again on the workers left)."""
    with local_cluster(THREADS) as client:
        pid = sorted(client.run(os.getpid).items())[0][1]
        killed: list[int] = []

        def kill() -> None:
            killed.append(_settled(lab))
            os.kill(pid, signal.SIGKILL)

        # Both workers pay at the same pace: each is halfway through its second partition.
        at = 3 * TEXTS // PARTITIONS
        watcher = when(lambda: _settled(lab) >= at, kill, timeout_s=120)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lab.batch_embed(
                series,
                model=EMBED,  # no dimensions=: the width is the model's, published in its catalog
                rows_per_request=1,
                concurrency=CONCURRENCY,
                out=out,
                progress=None,
            )
        watcher.join(timeout=5)
    assert killed and killed[0] < TEXTS, "the worker was not killed mid-run"
    # Every partition file has one schema (the model's vector width, even for a partition
    # without a vector), so the folder reads as one table with Arrow and with Dask.
    files = sorted(out.glob("*.parquet"))
    assert len(files) == PARTITIONS and not list(out.glob("*.partial"))
    assert {str(pq.read_schema(path)) for path in files} == {str(pq.read_schema(files[0]))}
    assert pq.read_schema(files[0]).field("vector").type == pa.list_(pa.float32(), WIDTH)
    frame = pq.read_table(out).to_pandas()
    with_dask = dd.read_parquet(out).compute()
    assert sorted(with_dask["text"]) == sorted(frame["text"])
    assert with_dask["status"].value_counts().to_dict() == frame["status"].value_counts().to_dict()
    _warned_once_if_lost(caught, frame)
    return killed[0], frame


def _warned_once_if_lost(caught: list[warnings.WarningMessage], frame: pd.DataFrame) -> None:
    """A Dask batch warns once, on the driver, exactly when rows were lost."""
    incomplete = [w for w in caught if issubclass(w.category, xl.IncompleteBatchWarning)]
    assert len(incomplete) == int(frame["status"].isin(LOST).any()), [str(w) for w in caught]


def test_a_killed_worker_loses_at_most_its_in_flight_answers(
    cluster, emulator_factory, team_lab, ledger, tmp_path
):
    # Slow paid answers: the killed worker has its requests on the wire.
    emulator = emulator_factory(paid_latency_s=0.05)
    lab = team_lab(emulator, ledger=ledger)
    words = texts(TEXTS, "sigkill")
    series = dd.from_pandas(pd.Series(words, name="text"), npartitions=PARTITIONS)

    settled_at_kill, first = _run_and_kill_a_worker(lab, series, tmp_path / "vectors")
    assert sorted(first["text"]) == sorted(words)
    assert set(first["status"]) <= {"ok", "cached", *LOST}
    transfers = emulator.chain.transfers()
    assert len(transfers) == TEXTS  # each text paid once, the dead worker's included

    # A fresh cluster (the module's: its workers never ran this batch) runs it again.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = lab.batch_embed(
            series, model=EMBED, rows_per_request=1, concurrency=CONCURRENCY, progress=None
        ).compute()
    _warned_once_if_lost(caught, again)
    counts = again["status"].value_counts().to_dict()
    assert sorted(again["text"]) == sorted(words)
    assert set(counts) <= {"cached", *LOST}, counts
    lost = sum(counts.get(status, 0) for status in LOST)
    # Only what was on the wire at the kill is paid without a stored answer.
    assert lost <= CONCURRENCY * THREADS, (settled_at_kill, counts)
    stored = again["status"] == "cached"
    assert again.loc[stored, "vector"].map(len).eq(WIDTH).all()
    # The re-run paid nothing: not for the answered texts, not for the lost ones.
    assert again["paid_usd"].sum() == 0 and emulator.chain.transfers() == transfers
    per_key = transfers_per_key(lab, emulator)  # every text's request settled once
    assert set(per_key) == set(again["request_key"]) and set(per_key.values()) == {1}
    # The ledger's settled amounts are what the chain received, payment by payment.
    settled = {
        row["nonce"].lower(): row["amount_atomic"]
        for row in lab.ledger.rows()
        if row["status"] == "settled"
    }
    assert settled == {t.nonce.lower(): t.amount_atomic for t in transfers}
