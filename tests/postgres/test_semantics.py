"""The ledger, budget, claims, media jobs and report library mean the same on both backends.

Every test here runs twice (``ledger_url``: a SQLite file, then a PostgreSQL database): the
payment lifecycle and budget state, the cap, held refusals, recovery of a stopped process's
rows, the claim state machine, job rows and owned reports joined to the ledger, committed
spend, threads sharing a budget, and the SQL the backends must read alike (placeholders,
``%`` and ``?`` in literals, rows by name, integer sums).
"""

from __future__ import annotations

import random
import threading
from decimal import Decimal

import pytest
from support.postgres import meta, settled, signed

import x402lab as xl
from x402lab.analysis.spend import spend
from x402lab.ledger import (
    ClaimAction,
    Claimed,
    Claims,
    ClaimStatus,
    Jobs,
    Ledger,
    PaymentStatus,
    ReportLibrary,
    SignedAuthorization,
    ledger_schema,
)
from x402lab.ledger.claim_rows import move_claims
from x402lab.ledger.payments import move_payments

A = ClaimAction
SCOPE = "batch:chat"


def open_ledger(url: str, **kw) -> Ledger:
    return Ledger(url, **kw)


def auth(byte: str, valid_before: int = 10**10):
    """``sign`` for ``reserve``: the row is written ahead as signed with nonce ``0xbyte..``."""
    return lambda: SignedAuthorization("0x" + byte * 32, "0xP", valid_before)


def test_lifecycle_budget_state_and_rows(ledger_url):
    ledger = open_ledger(ledger_url, user="ana@laptop")
    budget = xl.Budget(usd=1.0, name="b").bind(ledger)
    first = budget.reserve(300_000, meta("one"), auth("01"))
    second = budget.reserve(200_000, meta("two"))
    ledger.record_settled(first, tx_hash="0xabc", payer="0xP")
    ledger.release(second, error="not sent")
    state = budget.state()
    assert (state.settled_atomic, state.in_flight_atomic, state.unknown_atomic) == (300_000, 0, 0)
    assert state.remaining_atomic == 700_000
    rows = ledger.rows()
    assert [r["status"] for r in rows] == ["settled", "released"]
    assert rows[0]["tx_hash"] == "0xabc" and rows[0]["amount_usd"] == Decimal("0.3")
    assert {r["user"] for r in rows} == {"ana@laptop"}
    assert ledger.to_arrow().schema == ledger_schema()
    frame = ledger.to_pandas()
    assert frame["amount_atomic"].dtype == "int64"
    assert str(frame["ts"].dtype) == "datetime64[us, UTC]"
    with pytest.raises(xl.ConfigError, match="cannot move to 'settled' from 'released'"):
        ledger.record_settled(second, tx_hash="0x1", payer="0xP")
    ledger.close()


def test_the_cap_refuses_and_records_and_spend_survives_a_reopen(ledger_url):
    ledger = open_ledger(ledger_url)
    budget = xl.Budget(usd=0.5, name="small").bind(ledger)
    settled(ledger, "paid", 400_000, budget="small", cap=500_000)
    with pytest.raises(xl.BudgetExceeded, match="0.60 USD exceeds what budget 'small' has left"):
        budget.reserve(600_000, meta("too-much"))
    assert [r["status"] for r in ledger.rows()] == ["settled", "refused"]
    ledger.close()
    again = xl.Budget(usd=0.5, name="small").bind(open_ledger(ledger_url))
    assert again.spent_usd == 0.4 and again.remaining_usd == pytest.approx(0.1)


def test_amounts_above_32_bits_are_exact(ledger_url):
    ledger = open_ledger(ledger_url)
    big = 5_000_000_000_123  # 5 million USD in atomic units: needs 64-bit columns
    settled(ledger, "whale", big, budget="big")
    assert ledger.budget_state("big").settled_atomic == big
    assert int(spend(ledger, by="budget", atomic=True)["settled_atomic"].iloc[0]) == big


def test_a_refused_signed_payment_counts_past_its_window_until_the_chain_frees_it(ledger_url):
    clock = [1000.0]
    ledger = open_ledger(ledger_url, now=lambda: clock[0])
    budget = xl.Budget(usd=0.3, name="h").bind(ledger)
    row = budget.reserve(200_000, meta("r"), auth("04", 1300))
    ledger.record_rejected(row, "settlement failed")
    assert budget.state().held_atomic == 200_000
    assert budget.committed_atomic() == 200_000  # the running total agrees with the rows
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(200_000, meta("r2"))
    clock[0] = 1300 + 61
    # Its window passed by the clock, but only the chain can say the server did not settle
    # it: it still counts (tests/prepay/test_hostile_prepay.py frees it through the chain).
    assert budget.committed_atomic() == 200_000 == budget.state().held_atomic
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(200_000, meta("r3"))
    table = spend(ledger, by="budget", atomic=True).set_index("budget")
    assert int(table.loc["h", "committed_atomic"]) == budget.state().committed_atomic


def test_rows_of_a_stopped_process_are_recovered(ledger_url):
    clock = [1000.0]
    ledger = open_ledger(ledger_url, now=lambda: clock[0])
    budget = xl.Budget(usd=1.0, name="r").bind(ledger)
    budget.reserve(100_000, meta("sent"), auth("03", 1300))
    budget.reserve(50_000, meta("held back"))
    assert ledger.recover_interrupted() == 0
    clock[0] += 3600
    assert ledger.recover_interrupted() == 2
    assert [r["status"] for r in ledger.rows()] == ["unknown", "released"]
    assert budget.state().committed_atomic == 100_000 == budget.state().unknown_atomic


def test_an_unknown_payment_is_resumed_with_its_same_signed_payload(ledger_url):
    ledger = open_ledger(ledger_url)
    row = signed(ledger, "k", valid_before=10**10)
    ledger.record_unknown(row, "connection dropped after sending")
    resumed = ledger.resume_payment("k", valid_until=10**9)
    assert resumed is not None and (resumed.id, resumed.header) == (row, "signed-payload")
    assert [p.id for p in ledger.unresolved()] == [row]


def test_claims_pay_once_wait_reuse_and_maybe_paid(ledger_url):
    ledger = open_ledger(ledger_url)
    mine, other = Claims(ledger.db), Claims(ledger.db, owner="host:2:1")
    assert mine.claim(SCOPE, ["k"], payment_key="req-1")["k"].action is A.PAY
    assert other.claim(SCOPE, ["k"])["k"].action is A.WAIT
    row = settled(ledger, "req-1", 12_345)
    assert mine.complete(SCOPE, [("k", b"hello")]) == ["k"]
    got = other.claim(SCOPE, ["k"])["k"]
    assert (got.action, got.record.answer, got.record.ledger_id) == (A.REUSE, b"hello", row)
    assert (got.record.payment_status, got.record.amount_atomic) == ("settled", 12_345)
    mine.claim(SCOPE, ["u"])
    lost = signed(ledger, "u")
    ledger.record_unknown(lost, "dropped", spent=True)  # nothing left to send again
    assert mine.release(SCOPE, ["u"], "dropped") == {"u": ClaimStatus.UNKNOWN}
    assert other.claim(SCOPE, ["u"])["u"].action is A.MAYBE_PAID
    ledger.record_settled(lost, tx_hash="0xfound", payer="0xPayer")
    assert mine.get(SCOPE, ["u"])["u"].payment_status == "settled"


def test_a_stale_claim_is_taken_over_and_renewal_keeps_one(ledger_url):
    ledger = open_ledger(ledger_url)
    clock = [1000.0]
    gone = Claims(ledger.db, owner="dead:7:1", now=lambda: clock[0], stale_after_s=60)
    me = Claims(ledger.db, now=lambda: clock[0], stale_after_s=60)
    gone.claim(SCOPE, ["a", "b"])
    clock[0] += 30
    assert gone.renew(SCOPE, ["b"]) == ["b"]
    clock[0] += 40
    got = me.claim(SCOPE, ["a", "b"])
    assert (got["a"].action, got["b"].action) == (A.PAY, A.WAIT)
    old, new = me.history(SCOPE, "a")
    assert old.status == "failed" and "abandoned" in (old.error or "") and new.status == "pending"


def test_an_illegal_move_refuses_naming_the_row_and_moves_nothing(ledger_url):
    ledger = open_ledger(ledger_url)
    claims = Claims(ledger.db)
    keys = [f"m-{i}" for i in range(1200)]  # more than one chunk of ids
    ids = [c.record.id for c in claims.claim(SCOPE, keys).values()]
    claims.complete(SCOPE, [("m-700", b"kept")])
    done = ids[700]
    with (
        pytest.raises(xl.ConfigError, match=rf"claim row {done} .* to 'failed' from 'done'"),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(i, "gave up") for i in ids], ClaimStatus.FAILED, 1, sets="error = ?")
    assert {c.status for c in claims.all(SCOPE)} == {ClaimStatus.PENDING, ClaimStatus.DONE}
    first, second = signed(ledger, "p1"), signed(ledger, "p2")
    ledger.record_expired(second)
    with (
        pytest.raises(xl.ConfigError, match=rf"ledger row {second} .* to 'unknown' from 'expired'"),
        ledger.db.transaction() as tx,
    ):
        move_payments(tx, [first, second], PaymentStatus.UNKNOWN, 1)
    assert [r["status"] for r in ledger.rows()] == ["signed", "expired"]


def test_media_jobs_join_their_money_from_the_ledger(ledger_url):
    ledger = open_ledger(ledger_url)
    jobs = Jobs(ledger)
    gateway, key = "http://127.0.0.1:9/", "music-key"
    claimed = jobs.claim(gateway=gateway, kind="music", request_key=key)
    assert isinstance(claimed, Claimed) and claimed.action is A.PAY
    row = signed(ledger, key, 90_000)
    ledger.record_unknown(row, "no receipt")
    body = {"model": "ace-step-15", "prompt": "calm piano, 100% acoustic?"}
    job = jobs.complete_claim(claimed, model="ace", queue_id="q-1", request=body, ledger_id=row)
    assert (job.paid_atomic, job.payment_status, job.request) == (None, "unknown", body)
    ledger.record_settled(row, tx_hash="0xfound", payer="0xPayer")
    jobs.update(job.id, status="completed", cleaned_up=True, size_bytes=2**40)
    job = jobs.get(job.id)
    assert job is not None and (job.paid_atomic, job.tx_hash) == (90_000, "0xfound")
    assert (job.status, job.cleaned_up, job.size_bytes) == ("completed", True, 2**40)
    assert jobs.claim(gateway=gateway, kind="music", request_key=key) == job


def test_owned_reports_are_never_bought_twice(ledger_url):
    from x402lab.errors import PaymentRefused

    ledger = open_ledger(ledger_url)
    library = ReportLibrary(ledger, "http://reports.test/")
    reports = [{"id": "r1", "createdAt": "2025-01-01"}, {"id": "r2", "createdAt": "2025-03-01"}]
    order = library.claim("alice", ["r1", "r2"], "username=alice")
    row = settled(ledger, order.request_key, 20_000)
    library.complete(order, reports, ledger_id=row, receipt={"ok": True}, charged_usd=0.02,
                     response_text='{"reports": "as received"}')  # fmt: skip
    assert library.owned("alice") == {"r1", "r2"}
    assert [r["report_id"] for r in library.records("alice")] == ["r2", "r1"]
    with pytest.raises(PaymentRefused):
        library.claim("alice", ["r1"], "username=alice")


def test_spend_by_user_and_payer_says_who_spent_what(ledger_url):
    ana = open_ledger(ledger_url, user="ana@laptop")
    ben = open_ledger(ledger_url, user="ben@desktop")
    settled(ana, "a1", 10_000)
    settled(ana, "a2", 5_000)
    settled(ben, "b1", 7_000)
    table = spend(ana, by="user", atomic=True).set_index("user")
    assert table["settled_atomic"].to_dict() == {"ana@laptop": 15_000, "ben@desktop": 7_000}
    assert spend(ben, by="payer", atomic=True)["payer"].tolist() == ["0xPayer"]


def test_threads_sharing_a_budget_never_overshoot(ledger_url):
    ledger = open_ledger(ledger_url)
    cap = 1_000_000
    budget = xl.Budget(usd=cap / 1_000_000, name="shared").bind(ledger)
    prices = [random.Random(seed).randint(1, 90_000) for seed in range(120)]
    granted: list[int] = []
    lock = threading.Lock()

    def work(chunk: list[int]) -> None:
        for price in chunk:
            try:
                budget.reserve(price, meta())
            except xl.BudgetExceeded:
                continue
            with lock:
                granted.append(price)

    workers = [threading.Thread(target=work, args=(prices[i::6],)) for i in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sum(granted) <= cap and budget.state().in_flight_atomic == sum(granted)
    [total] = ledger.query("SELECT counted_atomic FROM budgets WHERE name = ?", ("shared",))
    assert total[0] == total["counted_atomic"] == budget.state().committed_atomic
    assert len(ledger.rows(where="status = 'refused'")) + len(granted) == len(prices)


def test_sql_reads_alike_placeholders_literals_and_rows(ledger_url):
    ledger = open_ledger(ledger_url)
    settled(ledger, "50% off?", 10)
    [row] = ledger.query(
        "SELECT request_key, 'what?' AS q, '100%' AS pct, amount_atomic + ? AS more,"
        " COALESCE(SUM(amount_atomic), 0) AS total FROM payments"
        " WHERE request_key LIKE '50%' AND request_key = ? GROUP BY request_key, amount_atomic",
        (5, "50% off?"),
    )
    assert tuple(row) == ("50% off?", "what?", "100%", 15, 10)
    assert row["total"] == 10 and isinstance(row["total"], int)
    assert dict(zip(row.keys(), row, strict=True))["pct"] == "100%"
    assert ledger.rows(where="request_key = ?", params=("50% off?",))[0]["amount_atomic"] == 10
