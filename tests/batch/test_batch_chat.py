"""batch_chat and estimate on the emulator: budget, concurrency, dedup, quotes, failures."""

from __future__ import annotations

import random
import sqlite3
import threading

import pandas as pd
import pyarrow as pa
import pytest
from support.batch import CHEAP, PRICEY, chain_atomic, settled_atomic, transfers_per_key

import x402lab as xl
from x402lab.batch import BatchSummary
from x402lab.batch.output import BatchProgress
from x402lab.money import usd_to_atomic


def _random_rows(n: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    return pd.DataFrame(
        {
            "topic": [" ".join(rng.choices(words, k=rng.randint(1, 40))) for _ in range(n)],
            "n": [rng.randint(1, 9) for _ in range(n)],
        }
    )


def test_budget_holds_with_random_prices_at_concurrency_16(emulator_factory, lab_factory):
    emulator = emulator_factory(paid_latency_s=0.02)
    lab = lab_factory(emulator, usd=0.5)
    # Prompts of random length: input tokens make every row's price different.
    rng = random.Random(7)
    rows = pd.DataFrame({"text": ["word " * rng.randint(1, 2000) for _ in range(60)]})
    rows["i"] = range(len(rows))
    args = dict(model=PRICEY, prompt="Summarize item {i}: {text}", max_tokens=100)
    quotes = lab.estimate(rows, **args).rows["quoted_atomic"]
    assert quotes.nunique() > 40 and quotes.min() >= 10_000 and quotes.sum() > 500_000

    # The exact quote is above the budget: refused before anything is signed, unless the
    # caller chooses to spend what is left (partial=True).
    with pytest.raises(xl.BudgetExceeded, match=r"exact quote is .* 0\.50 USD left.*partial=True"):
        lab.batch_chat(rows, concurrency=16, progress=None, **args)
    assert lab.ledger.rows() == [] and emulator.chain.transfers() == []
    with pytest.warns(xl.IncompleteBatchWarning, match=r"\d+ skipped_budget \(0\.00 USD paid"):
        frame = lab.batch_chat(rows, concurrency=16, progress=None, partial=True, **args)
    cap = usd_to_atomic(0.5)
    assert settled_atomic(lab) <= cap
    assert chain_atomic(emulator) == settled_atomic(lab)
    statuses = frame["status"].tolist()
    assert set(statuses) == {"ok", "skipped_budget"}
    # Rows start in order; once one is refused, no row that starts later is paid.
    first_skip = statuses.index("skipped_budget")
    assert set(statuses[first_skip + 16 :]) == {"skipped_budget"}
    skipped = frame[frame["status"] == "skipped_budget"]
    assert skipped["paid_usd"].eq(0).all() and skipped["error"].str.contains("budget").all()
    assert usd_to_atomic(frame["paid_usd"].sum()) == settled_atomic(lab)
    summary = BatchSummary.of(frame)
    assert summary.paid_atomic == settled_atomic(lab)
    assert summary.counts["skipped_budget"] == statuses.count("skipped_budget")
    assert summary.paid_requests == statuses.count("ok") < summary.requests
    state = lab.budget.state()
    assert state.in_flight_atomic == 0 and state.committed_atomic <= cap


def test_at_most_concurrency_payments_are_unresolved(emulator_factory, lab_factory, tmp_path):
    emulator = emulator_factory(paid_latency_s=0.05)
    lab = lab_factory(emulator)
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        db = sqlite3.connect(tmp_path / "ledger.sqlite", timeout=30)
        while not stop.is_set():
            (open_rows,) = db.execute(
                "SELECT COUNT(*) FROM payments WHERE status IN ('reserved', 'signed')"
            ).fetchone()
            seen.append(open_rows)
        db.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        frame = lab.batch_chat(
            [f"question {i}" for i in range(40)], model=CHEAP, concurrency=4, progress=None
        )
    finally:
        stop.set()
        watcher.join()
    assert (frame["status"] == "ok").all()
    assert 2 <= max(seen) <= 4


def test_identical_rows_are_paid_once_and_savings_counted(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    prompts = ["tell me about tea", "tell me about coffee"] * 5 + ["tell me about water"]
    frame = lab.batch_chat(prompts, model=CHEAP, max_tokens=32, concurrency=8, progress=None)
    assert frame["status"].tolist() == ["ok", "ok"] + ["cached"] * 8 + ["ok"]
    assert len(emulator.chain.transfers()) == 3
    assert max(transfers_per_key(lab, emulator).values()) == 1
    cached = frame[frame["status"] == "cached"]
    assert cached["paid_usd"].eq(0).all() and cached["tx_hash"].isna().all()
    assert (cached["response"] == frame["response"].iloc[[0, 1] * 4].to_numpy()).all()
    summary = BatchSummary.of(frame)
    assert summary.duplicates == 8 and summary.requests == 3
    assert summary.saved_atomic == usd_to_atomic(cached["quoted_usd"].sum()) == 8 * 10_000
    assert summary.paid_atomic == chain_atomic(emulator) == 30_000


def test_estimate_is_free_and_equals_what_is_paid(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    rows = _random_rows(24, seed=11)
    rows = pd.concat([rows, rows.head(3)], ignore_index=True)  # three duplicates
    args = dict(model=PRICEY, prompt="Explain {topic} in {n} points", max_tokens=300)
    estimate = lab.estimate(rows, **args)
    assert lab.ledger.rows() == [] and emulator.chain.transfers() == []
    assert estimate.requests == 24 and estimate.failed == 0
    assert estimate.rows["duplicate"].sum() == 3
    assert (estimate.rows["status"] == "quoted").all()

    frame = lab.batch_chat(rows, concurrency=8, progress=None, **args)
    assert (frame["request_key"] == estimate.rows["request_key"]).all()
    ok = frame["status"] == "ok"
    assert (frame.loc[ok, "paid_usd"] == estimate.rows.loc[ok, "quoted_usd"]).all()
    assert estimate.total_atomic == settled_atomic(lab) == chain_atomic(emulator)
    paid_by_key = {r["request_key"]: r["amount_atomic"] for r in lab.ledger.rows()}
    quoted = estimate.rows.set_index("request_key")["quoted_atomic"].to_dict()
    assert paid_by_key == quoted
    # The local price-list estimate sits beside the exact quote.
    assert estimate.local_total_usd is not None
    assert estimate.rows["estimate_usd"].notna().all()


def test_failed_rows_never_fail_the_batch(emulator_factory, lab_factory):
    emulator = emulator_factory(settle_fail_rate=0.5, seed=5)
    lab = lab_factory(emulator, per_call_usd=0.05)
    prompts = [f"row {i}" for i in range(20)]
    with pytest.warns(xl.IncompleteBatchWarning, match=r"\d+ failed \(0\.00 USD paid"):
        frame = lab.batch_chat(prompts, model=CHEAP, concurrency=8, progress=None)
    assert set(frame["status"]) == {"ok", "failed"}
    failed = frame[frame["status"] == "failed"]
    assert failed["paid_usd"].eq(0).all()
    assert failed["error"].str.contains("PaymentRejected").all()
    assert usd_to_atomic(frame["paid_usd"].sum()) == chain_atomic(emulator)
    # A row above the per-call cap is refused (nothing signed); the rest still run.
    mixed = ["short", "word " * 6000]
    with pytest.warns(xl.IncompleteBatchWarning, match=r"1 refused \(0\.00 USD paid; above"):
        pricey = lab.batch_chat(mixed, model=PRICEY, max_tokens=100, progress=None)
    assert pricey["status"].iloc[0] in ("ok", "failed") and pricey["status"].iloc[1] == "refused"
    assert "cap" in pricey["error"].iloc[1]
    transfers = len(emulator.chain.transfers())
    # When every request is above the cap, the batch is refused before anything is signed.
    with pytest.raises(xl.BudgetExceeded, match="every one of its 2 requests is above"):
        lab.batch_chat(["short", "another"], model=PRICEY, max_tokens=4000, progress=None)
    assert len(emulator.chain.transfers()) == transfers


def test_empty_and_full_results_have_the_same_dtypes(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory())
    full = lab.batch_chat(["hi there"], model=CHEAP, progress=None)
    empty = lab.batch_chat([], model=CHEAP, progress=None)
    assert len(empty) == 0
    assert empty.dtypes.to_dict() == full.dtypes.to_dict()
    assert full["prompt_tokens"].dtype == "Int64" and full["paid_usd"].dtype == pd.ArrowDtype(
        pa.decimal128(18, 6)
    )


def test_prompt_template_and_input_columns(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory())
    rows = pd.DataFrame({"city": ["Lyon", "Oslo"], "days": [2, 3]}, index=["a", "b"])
    frame = lab.batch_chat(
        rows,
        model=CHEAP,
        prompt="Plan {days} days in {city}",
        system="Be brief",
        max_tokens=40,
        progress=None,
    )
    assert list(frame.index) == ["a", "b"]
    assert frame.columns[:2].tolist() == ["city", "days"]
    assert (frame["status"] == "ok").all() and frame["response"].str.len().gt(0).all()
    with pytest.raises(xl.ConfigError, match="country"):
        lab.batch_chat(rows, model=CHEAP, prompt="{country}", progress=None)
    with pytest.raises(xl.ModelNotFound):
        lab.batch_chat(["x"], model="no-such-model", progress=None)
    assert len(lab.ledger.rows()) == 2  # nothing was tried for the two errors


def test_progress_reports_rows_and_spend(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory(), usd=0.05)
    updates: list[BatchProgress] = []
    with pytest.warns(xl.IncompleteBatchWarning, match="3 skipped_budget"):
        frame = lab.batch_chat(
            [f"p{i}" for i in range(8)], model=CHEAP, concurrency=2, progress=updates.append,
            partial=True,
        )  # fmt: skip
    assert updates[-1].finished and updates[-1].done == 8
    assert [u.done for u in updates] == sorted(u.done for u in updates)
    assert updates[-1].paid_atomic == 50_000 == updates[-1].cap_atomic
    assert updates[-1].counts == {"ok": 5, "skipped_budget": 3}
    assert frame["status"].value_counts().to_dict() == {"ok": 5, "skipped_budget": 3}
