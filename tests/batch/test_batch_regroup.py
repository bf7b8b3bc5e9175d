"""Re-runs that group texts into requests differently never pay for a text twice.

A paid request whose answer was never stored (a killed process, a store that failed) is found
again through the texts it carried (each text's claim names the request that carried it),
whether the re-run cuts a smaller request because some texts are stored, or uses another
``per_request``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from support.batch import EMBED, texts_per_transfer

import x402lab as xl
from x402lab.emulator.chain import Chain
from x402lab.errors import StoreError

CHILD = textwrap.dedent(
    """
    import json, sys
    import x402lab as xl

    gateway, reports, ledger, texts, per_request, model = sys.argv[1:7]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_env(), ledger=ledger,
                     budget=xl.Budget(usd=50))
    lab.batch_embed(json.loads(texts), model=model, rows_per_request=int(per_request),
                    progress=None)
    print("finished", flush=True)
    """
)


def _kill_once_paid(
    emulator: Any, tmp_path: Path, key: str, texts: list[str], per_request: int, transfers: int
) -> None:
    """Run a batch in a child process and SIGKILL it once ``transfers`` payments settled on
    the chain: the emulator holds every answer back, so none of them is stored."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    command = [
        sys.executable,
        str(script),
        emulator.gateway_url,
        emulator.reports_url,
        str(tmp_path / "ledger.sqlite"),
        json.dumps(texts),
        str(per_request),
        EMBED,
    ]
    env = {**os.environ, "X402LAB_PRIVATE_KEY": key}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as child:
        try:
            deadline = time.monotonic() + 30
            while len(emulator.chain.transfers()) < transfers:
                assert child.poll() is None, "the child ended before paying"
                assert time.monotonic() < deadline, "the child never paid"
                time.sleep(0.01)
            os.kill(child.pid, signal.SIGKILL)  # answers still held back: nothing stored
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                child.wait()
    assert child.returncode == -signal.SIGKILL
    assert len(emulator.chain.transfers()) == transfers


def _texts_paid(lab: Any, emulator: Any, texts: list[str]) -> Counter[str]:
    """How many chain transfers paid for each text."""
    groups = texts_per_transfer(lab, emulator, texts, model=EMBED)
    return Counter(text for group in groups for text in group)


def _resuming(lab: Any) -> Any:
    """``lab``, taking over the pending claims a killed run left after a second (a minute by
    default) instead of waiting for them longer."""
    lab.async_.batches.claims.stale_after_s = 1.0
    return lab


def _pay_then_fail_to_store(lab: Any, emulator: Any, ledger: Path, texts: list[str]) -> int:
    """Run a batch (2 texts a request) whose answers cannot be stored, as with a full disk:
    payments settle, no answer is kept, and the batch stops with the error. Returns how many
    requests were paid."""
    before = len(emulator.chain.transfers())
    with sqlite3.connect(ledger) as db:
        db.execute(
            "CREATE TRIGGER full BEFORE UPDATE OF status ON claims WHEN NEW.status = 'done'"
            " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    with pytest.raises(StoreError, match="disk is full"):
        lab.batch_embed(texts, model=EMBED, rows_per_request=2, concurrency=1, progress=None)
    with sqlite3.connect(ledger) as db:
        db.execute("DROP TRIGGER full")
    paid = len(emulator.chain.transfers()) - before
    assert paid >= 1
    return paid


def test_a_smaller_request_killed_unanswered_is_not_bought_again(
    emulator_factory, lab_factory, tmp_path
):
    # Two emulators on one chain: one answers at once, one holds answers back after settling.
    chain = Chain()
    quick = emulator_factory(chain=chain)
    slow = emulator_factory(chain=chain, paid_latency_s=3.0)
    key = "0x" + secrets.token_hex(32)
    lab = _resuming(lab_factory(quick, key=key))
    first = lab.batch_embed(["alpha"], model=EMBED, progress=None)
    assert first["status"].tolist() == ["ok"]

    # alpha is stored, so beta and gamma go out as a request of their own; it is killed.
    texts = ["alpha", "beta", "gamma"]
    _kill_once_paid(slow, tmp_path, key, texts, per_request=3, transfers=2)

    # The killed run still holds beta and gamma: a run would wait for them, not pay.
    estimate = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=3)
    assert estimate.rows["status"].tolist() == ["cached", "pending", "pending"]
    assert estimate.total_atomic == 0 and estimate.requests == 0
    for per_request in (3, 1, 2):
        with pytest.warns(xl.IncompleteBatchWarning, match="2 unknown"):
            again = lab.batch_embed(texts, model=EMBED, rows_per_request=per_request, progress=None)
        assert again["status"].tolist() == ["cached", "unknown", "unknown"]
        assert again["paid_usd"].eq(0).all()
        assert again.attrs["batch"]["requests"] == 0
        # The unknown rows name the request that carried them, and their shares of it.
        assert again["request_key"].iloc[1] == again["request_key"].iloc[2]
        assert again["quoted_usd"].iloc[1:].sum() == Decimal("0.01")
    estimate = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=3)
    assert estimate.rows["status"].tolist() == ["cached", "unknown", "unknown"]
    assert len(chain.transfers()) == 2
    assert _texts_paid(lab, quick, texts) == Counter(texts)


def test_a_changed_per_request_after_a_kill_buys_no_text_twice(
    emulator_factory, lab_factory, tmp_path
):
    chain = Chain()
    quick = emulator_factory(chain=chain)
    slow = emulator_factory(chain=chain, paid_latency_s=3.0)
    key = "0x" + secrets.token_hex(32)
    texts = [f"text {i}" for i in range(4)]
    _kill_once_paid(slow, tmp_path, key, texts, per_request=2, transfers=2)

    lab = _resuming(lab_factory(quick, key=key))
    more = [*texts, "text 4"]
    with pytest.warns(xl.IncompleteBatchWarning, match="4 unknown"):
        frame = lab.batch_embed(more, model=EMBED, rows_per_request=1, progress=None)
    assert frame["status"].tolist() == ["unknown"] * 4 + ["ok"]
    assert frame.attrs["batch"]["requests"] == 1
    assert len(chain.transfers()) == 3
    # Regrouped once more: still nothing bought twice, and the new text is cached.
    with pytest.warns(xl.IncompleteBatchWarning, match="4 unknown"):
        again = lab.batch_embed(more, model=EMBED, rows_per_request=3, progress=None)
    assert again["status"].tolist() == ["unknown"] * 4 + ["cached"]
    assert len(chain.transfers()) == 3
    assert _texts_paid(lab, quick, more) == Counter(more)


def test_settled_but_not_stored_shows_its_status_under_any_grouping(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = ["one", "two", "three", "four"]
    lab.batch_embed(["zero"], model=EMBED, progress=None)
    paid = _pay_then_fail_to_store(lab, emulator, tmp_path / "ledger.sqlite", texts)

    with pytest.warns(xl.IncompleteBatchWarning, match='paid_not_stored .*rebuy="lost"'):
        frame = lab.batch_embed(texts, model=EMBED, rows_per_request=1, progress=None)
    lost = frame[frame["status"] == "paid_not_stored"]
    assert len(lost) == 2 * paid
    assert set(frame["status"]) <= {"paid_not_stored", "ok"}
    assert lost["paid_usd"].eq(0).all() and lost["quoted_usd"].eq(0.005).all()
    assert frame.attrs["batch"]["lost_atomic"] == 10_000 * paid
    assert lost["error"].str.contains("not bought again").all()
    with pytest.warns(xl.IncompleteBatchWarning, match="paid_not_stored"):
        again = lab.batch_embed(texts, model=EMBED, rows_per_request=4, progress=None)
    assert set(again["status"]) <= {"paid_not_stored", "cached"}
    assert (again["status"] == "paid_not_stored").sum() == 2 * paid
    assert _texts_paid(lab, emulator, ["zero", *texts]) == Counter(["zero", *texts])


def test_rebuy_buys_paid_not_stored_texts_again_in_any_grouping(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = ["one", "two", "three", "four"]
    paid = _pay_then_fail_to_store(lab, emulator, tmp_path / "ledger.sqlite", texts)
    lost = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=3)
    assert (lost.rows["status"] == "paid_not_stored").sum() == 2 * paid
    assert (
        lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=1, rebuy=True).total_atomic
        == 40_000
    )

    again = lab.batch_embed(texts, model=EMBED, rows_per_request=3, rebuy=True, progress=None)
    assert again["status"].tolist() == ["ok"] * 4 and again.attrs["batch"]["requests"] == 2
    assert _texts_paid(lab, emulator, texts) == Counter(
        {text: 2 if i < 2 * paid else 1 for i, text in enumerate(texts)}
    )
    # Bought again, their answers are stored now.
    assert lab.batch_embed(texts, model=EMBED, progress=None)["status"].tolist() == ["cached"] * 4


def test_rebuy_lost_buys_exactly_the_paid_not_stored_rows_again(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = ["one", "two", "three", "four", "five", "six"]
    lab.batch_embed(texts[4:], model=EMBED, progress=None)  # stored: never bought again
    paid = _pay_then_fail_to_store(lab, emulator, tmp_path / "ledger.sqlite", texts[:4])
    lost_texts = texts[: 2 * paid]
    # The summary and the warning name the lost rows, what they cost and the keyword.
    with pytest.warns(
        xl.IncompleteBatchWarning, match=f'{2 * paid} paid_not_stored .*rebuy="lost"'
    ):
        frame = lab.batch_embed(texts, model=EMBED, rows_per_request=1, progress=None)
    summary = xl.BatchSummary.of(frame)
    assert f"{2 * paid} rows paid earlier but not stored" in summary.describe()
    assert 'rebuy="lost"' in summary.describe()
    assert summary.status_atomic["paid_not_stored"] == summary.lost_atomic == 10_000 * paid
    # The estimate with the keyword prices exactly those rows.
    estimate = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=1, rebuy="lost")
    assert estimate.rows.loc[estimate.rows["status"] == "quoted", "text"].tolist() == lost_texts
    before = len(emulator.chain.transfers())
    again = lab.batch_embed(texts, model=EMBED, rows_per_request=1, rebuy="lost", progress=None)
    assert again["status"].tolist() == ["ok" if t in lost_texts else "cached" for t in texts]
    assert len(emulator.chain.transfers()) - before == len(lost_texts)  # one each, no more
    assert again.attrs["batch"]["paid_atomic"] == estimate.total_atomic
    # Stored now: a further run (with the keyword or not) buys nothing.
    third = lab.batch_embed(texts, model=EMBED, rebuy="lost", progress=None)
    assert set(third["status"]) == {"cached"}
    assert len(emulator.chain.transfers()) - before == len(lost_texts)
    with pytest.raises(xl.ConfigError, match='rebuy must be True, False or "lost"'):
        lab.batch_embed(texts, model=EMBED, rebuy="all", progress=None)
