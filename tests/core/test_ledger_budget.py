import threading
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.processes import racing

import x402lab as xl
from x402lab.ledger import Move, PaymentMeta, PaymentStatus, SignedAuthorization, ledger_schema

META = PaymentMeta(service="gateway", method="POST", path="/api/v1/chat/completions")


def auth(byte: str, valid_before: int = 10**10):
    """``sign`` for ``reserve``: the row is written ahead as signed with nonce ``0xbyte..``."""
    return lambda: SignedAuthorization("0x" + byte * 32, "0xP", valid_before)


def test_lifecycle_and_budget_state(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    budget = xl.Budget(usd=1.0, name="b").bind(ledger)
    first = budget.reserve(300_000, META, auth("01"))
    second = budget.reserve(200_000, META)
    ledger.record_settled(first, tx_hash="0xabc", payer="0xP")
    ledger.release(second, error="not sent")
    state = budget.state()
    assert (state.settled_atomic, state.in_flight_atomic, state.unknown_atomic) == (300_000, 0, 0)
    assert state.remaining_atomic == 700_000
    rows = ledger.rows()
    assert [r["status"] for r in rows] == ["settled", "released"]
    assert rows[0]["tx_hash"] == "0xabc" and rows[0]["amount_usd"] == Decimal("0.3")


def test_illegal_moves_are_refused(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    row = xl.Budget(usd=1.0).bind(ledger).reserve(1, META)
    with pytest.raises(xl.ConfigError, match="cannot move to 'settled' from 'reserved'"):
        ledger.record_settled(row, tx_hash="0x1", payer="0xP")


def test_over_budget_is_refused_and_recorded(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    budget = xl.Budget(usd=0.5, name="small").bind(ledger)
    budget.reserve(400_000, META)
    with pytest.raises(
        xl.BudgetExceeded, match="0.60 USD exceeds what budget 'small' has left: 0.10 USD"
    ):
        budget.reserve(600_000, META)
    assert [r["status"] for r in ledger.rows()] == ["reserved", "refused"]


def test_named_budget_keeps_its_spend_across_restarts(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = xl.Ledger(path)
    row = xl.Budget(usd=1.0, name="exp").bind(ledger).reserve(250_000, META, auth("02"))
    ledger.record_settled(row, tx_hash="0x1", payer="0xP")
    ledger.close()
    again = xl.Budget(usd=1.0, name="exp").bind(xl.Ledger(path))
    assert again.spent_usd == 0.25 and again.remaining_usd == 0.75


def test_tables_have_the_declared_schema_empty_or_full(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    empty = ledger.to_pandas()
    assert ledger.to_arrow().schema == ledger_schema()
    xl.Budget(usd=1.0).bind(ledger).reserve(5, META)
    full = ledger.to_pandas()
    assert list(empty.columns) == list(full.columns)
    assert dict(empty.dtypes) == dict(full.dtypes)
    assert str(full["ts"].dtype) == "datetime64[us, UTC]"
    assert full["amount_atomic"].dtype == "int64"
    assert isinstance(ledger.to_arrow(), pa.Table)


def test_stale_signed_rows_become_unknown_and_keep_counting(tmp_path):
    clock = [1000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=1.0).bind(ledger)
    budget.reserve(100_000, META, auth("03", 1300))
    assert ledger.recover_interrupted() == 0
    clock[0] = 2000.0
    assert ledger.recover_interrupted() == 1
    assert budget.state().unknown_atomic == 100_000


def test_stale_reservations_are_released(tmp_path):
    clock = [1000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=1.0).bind(ledger)
    budget.reserve(100_000, META)
    assert ledger.recover_interrupted() == 0  # a live reservation is left alone
    clock[0] += 3600
    assert ledger.recover_interrupted() == 1
    assert budget.state().committed_atomic == 0
    assert [r["status"] for r in ledger.rows()] == ["released"]


def test_a_refused_signed_payment_counts_until_the_chain_says_it_expired(tmp_path):
    clock = [1000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=0.3).bind(ledger)
    row = budget.reserve(200_000, META, auth("04", 1300))
    ledger.record_rejected(row, "settlement failed")
    assert budget.state().held_atomic == 200_000
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(200_000, META)
    assert ledger.held_past_window(budget.name) == []  # still inside its window
    clock[0] = 1300 + 61  # past validBefore and the clock slack: the clock alone frees nothing
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(200_000, META)
    assert budget.state().held_atomic == 200_000 == budget.committed_atomic()
    assert [r["held"] for r in ledger.rows() if r["id"] == row] == [True]
    # What the chain check asks about, and what it does when the nonce is unused.
    assert ledger.held_past_window(budget.name) == [row]
    ledger.apply_outcomes([Move(row, PaymentStatus.EXPIRED, None, "unused")])
    budget.reserve(200_000, META)
    assert budget.state().held_atomic == 0
    assert ledger.held_past_window(budget.name) == []


def test_an_old_ledger_is_upgraded_without_forgetting_spend(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE payments (id INTEGER PRIMARY KEY, ts_us INTEGER NOT NULL, updated_us"
            " INTEGER NOT NULL, service TEXT NOT NULL, method TEXT, path TEXT, model TEXT,"
            " request_key TEXT, budget TEXT NOT NULL, amount_atomic INTEGER NOT NULL,"
            " upstream_usd REAL, price_mult REAL, status TEXT NOT NULL, tx_hash TEXT, payer TEXT,"
            " pay_to TEXT, network TEXT, asset TEXT, nonce TEXT UNIQUE, valid_before INTEGER,"
            " error TEXT)"
        )
        db.execute(
            "CREATE TABLE budgets (name TEXT PRIMARY KEY, cap_atomic INTEGER, per_call_atomic"
            " INTEGER, created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL)"
        )
        db.execute("INSERT INTO budgets VALUES ('exp', 1000000, NULL, 1, 1)")
        db.execute(
            "INSERT INTO payments (ts_us, updated_us, service, budget, amount_atomic, status)"
            " VALUES (1, 1, 'gateway', 'exp', 900000, 'settled')"
        )
    budget = xl.Budget(usd=1.0, name="exp").bind(xl.Ledger(path))
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(200_000, META)
    assert budget.state().settled_atomic == 900_000


@settings(max_examples=25, deadline=None)
@given(
    cap=st.integers(min_value=1, max_value=2_000_000),
    prices=st.lists(st.integers(min_value=1, max_value=400_000), min_size=1, max_size=40),
    threads=st.integers(min_value=1, max_value=8),
)
def test_threads_never_overshoot_the_cap(tmp_path_factory, cap, prices, threads):
    ledger = xl.Ledger(tmp_path_factory.mktemp("b") / "l.sqlite")
    budget = xl.Budget(usd=cap / 1_000_000).bind(ledger)
    granted: list[int] = []
    lock = threading.Lock()

    def work(chunk: list[int]) -> None:
        for price in chunk:
            try:
                budget.reserve(price, META)
            except xl.BudgetExceeded:
                continue
            with lock:
                granted.append(price)

    workers = [threading.Thread(target=work, args=(prices[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sum(granted) <= cap
    assert budget.state().in_flight_atomic == sum(granted)
    # The running total used for reservations agrees with the rows themselves.
    [total] = ledger.query("SELECT counted_atomic FROM budgets WHERE name = ?", (budget.name,))
    assert total[0] == budget.state().committed_atomic
    # Every price that fitted in what was left when it came was granted: nothing lost.
    refused = [r for r in ledger.rows() if r["status"] == "refused"]
    assert len(refused) + len(granted) == len(prices)


def _reserve_many(path: str, prices: list[int]) -> None:
    ledger = xl.Ledger(path)
    budget = xl.Budget(usd=1.0, name="shared").bind(ledger)
    for price in prices:
        try:
            budget.reserve(price, META)
        except xl.BudgetExceeded:
            pass


def test_processes_sharing_a_ledger_never_overshoot(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    xl.Ledger(path)
    context = racing()
    prices = [[37_000 + 1000 * i + p for i in range(30)] for p in range(4)]
    procs = [context.Process(target=_reserve_many, args=(path, chunk)) for chunk in prices]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    state = xl.Budget(usd=1.0, name="shared").bind(xl.Ledger(path)).state()
    assert 1_000_000 - max(max(c) for c in prices) < state.in_flight_atomic <= 1_000_000


def test_the_running_total_answers_what_the_rows_answer(tmp_path):
    # A batch asks the running total (``committed_atomic``) before and after it runs; it must
    # agree with the sum over the rows (``state()``) through every kind of row.
    clock = [1000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=1.0, name="t").bind(ledger)

    def agree() -> int:
        state = budget.state()
        assert budget.committed_atomic() == state.committed_atomic
        assert budget.remaining_atomic() == state.remaining_atomic
        return state.committed_atomic

    assert agree() == 0
    signs = (auth("01", 1300), auth("02", 1300), auth("03", 1300), auth("04", 1300), None)
    amounts = (100_000, 20_000, 3_000, 400_000, 5)
    settled, signed, unknown, rejected, released = (
        budget.reserve(a, META, sign) for a, sign in zip(amounts, signs, strict=True)
    )
    ledger.record_settled(settled, tx_hash="0xabc", payer="0xP")
    ledger.record_unknown(unknown, "no answer")
    ledger.record_rejected(rejected, "settlement failed")  # held until the chain says
    ledger.release(released, error="not sent")
    assert agree() == 523_000
    clock[0] = 1300 + 61  # past its window: still counted until the chain is asked
    assert agree() == 523_000
    ledger.apply_outcomes([Move(rejected, PaymentStatus.EXPIRED, None, "unused")])
    assert agree() == 123_000
    assert xl.Budget(usd=2.0, name="never used").bind(ledger).committed_atomic() == 0


def test_one_stored_cap_per_named_budget(tmp_path):
    path = tmp_path / "team.sqlite"
    look = xl.Budget(name="team").bind(xl.Ledger(path, user="lead"))  # only looks: no cap
    assert look.caps() is not None and not look.caps().is_set
    ana = xl.Budget(usd=0.30, per_call_usd=0.10, name="team").bind(xl.Ledger(path, user="ana"))
    with pytest.raises(xl.ConfigError, match=r"cap 0\.30 USD.*asks for cap 0\.50 USD"):
        xl.Budget(usd=0.50, name="team").bind(xl.Ledger(path, user="ben"))
    ben = xl.Budget(name="team").bind(xl.Ledger(path, user="ben"))
    assert (ben.cap_atomic, ben.per_call_atomic) == (300_000, 100_000)
    ana.reserve(250_000, META)
    # The lead lowers the cap: ana's Budget still holds the old figure, but her reservations
    # are measured against the stored one, read in their transaction.
    look.set_cap(0.26)
    assert ana.cap_atomic == 300_000
    with pytest.raises(xl.BudgetExceeded, match=r"0\.01 USD of 0\.26 USD"):
        ana.reserve(20_000, META)
    assert ana.remaining_atomic() == 10_000 and ana.cap_atomic == 260_000
    look.set_cap(None)  # no total cap any more, for every process; the per-call cap is kept
    ben.reserve(900_000, META)
    caps = ben.caps()
    assert caps is not None and (caps.cap_atomic, caps.per_call_atomic, caps.set_by) == (
        None,
        100_000,
        "lead",
    )
