"""Paying with the first request while the emulator misbehaves on purpose: 429s and 503s
before the payment is looked at, settlement failures, and settled-then-500 answers, with a
price change in the middle. Whatever happens, every nonce settles at most once, no request
settles twice, every transfer is a ledger row, and a miss costs at most one extra signature.
"""

from __future__ import annotations

import warnings
from collections import Counter

from support.prepay import CHAT_MODEL, check_money, gate, restart

import x402lab as xl
from x402lab.batch import BatchSummary

FAULTS = {"rate_429": 0.15, "rate_5xx": 0.1, "settle_fail_rate": 0.05, "paid_then_500_rate": 0.05}


def _batch(lab, prompts):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", xl.IncompleteBatchWarning)
        frame = lab.batch_chat(
            prompts, model=CHAT_MODEL, max_tokens=8, concurrency=4, progress=None
        )
    # Rows the faults left unanswered are named in one IncompleteBatchWarning, and only then.
    ends = sorted(set(frame["status"]) - {"ok", "cached"})
    assert [w.category for w in caught] == ([xl.IncompleteBatchWarning] if ends else [])
    assert all(f" {status} (" in str(caught[0].message) for status in ends)
    return frame, BatchSummary.of(frame)


def test_prepaid_batches_under_faults_and_a_price_change_never_settle_twice(start, lab_on):
    emulator = start(seed=3, **FAULTS)
    # A budget without a cap: no exact price is asked before the run (nothing to refuse), so
    # payments go by price class, and the price change below makes them stale.
    lab = lab_on(emulator, budget=xl.Budget(name="prepay-faults"))
    prompts = [f"short question {i}" for i in range(40)]
    frame, summary = _batch(lab, prompts)
    assert summary.prepay_hits > 10  # most rows went with one request
    assert set(frame["status"]) <= {"ok", "failed", "unknown", "paid_not_stored"}
    rows = check_money(lab, emulator.chain)
    assert sum(r["prepaid"] and r["status"] == "settled" for r in rows) >= summary.prepay_hits
    # The operator raises the minimum charge while the lab's prediction says 0.01 USD.
    emulator = restart(emulator, seed=4, min_charge_usd=0.02, **FAULTS)
    start.keep(emulator)
    more = [f"another question {i}" for i in range(40)]
    frame, summary = _batch(lab, more)
    assert summary.prepay_misses >= 1
    assert summary.extra_signatures <= summary.prepay_misses
    rows = check_money(lab, emulator.chain)
    refused = [r for r in rows if (r["error"] or "").startswith("prepay_refused")]
    assert refused and all(r["status"] == "rejected" and r["prepaid"] for r in refused)
    assert all(r["amount_atomic"] == 10_000 for r in refused)  # only stale predictions
    # At most one extra signature per logical request: two signed rows at most per key.
    signed = Counter(r["request_key"] for r in rows if r["nonce"] is not None)
    assert max(signed.values()) <= 2
    after = [t.amount_atomic for t in emulator.chain.transfers()][-summary.paid_requests :]
    assert set(after) <= {20_000}  # the new price, never a stale one settled
    # What the restarted gateway settled is exactly what the chain moved at the new price.
    assert gate(emulator.gateway_url)["settled"] == sum(
        t.amount_atomic == 20_000 for t in emulator.chain.transfers()
    )
