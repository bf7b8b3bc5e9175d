"""One way to change a status (docs/money.md, money rule 8).

Every status a ledger's ``payments`` and ``claims`` rows take is an initial status of a new
row or one of its table's declared moves (``TRANSITIONS``, ``CLAIM_TRANSITIONS``): triggers in
the ledger file log every status write of a run with faults and re-runs, wherever the code
that writes it lives. The transition functions refuse a move their table does not allow,
naming the row, the status it is in and the one asked for.
"""

from __future__ import annotations

import sqlite3
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from support.client import CHAT_MODEL, settings
from support.ledger import meta, signed

import x402lab as xl
from x402lab.emulator.settings import Faults
from x402lab.ledger import Claims, Ledger
from x402lab.ledger.claim_rows import insert_rows, move_claims
from x402lab.ledger.payments import insert_payment, move_payments
from x402lab.ledger.statuses import (
    CLAIM_INITIAL,
    CLAIM_TRANSITIONS,
    INITIAL,
    TRANSITIONS,
    UNRESOLVED,
    ClaimStatus,
    PaymentStatus,
)

C, P = ClaimStatus, PaymentStatus

#: Every status write of the two tables, logged by triggers in the ledger file itself, so any
#: code path that writes a status shows up, wherever it lives.
_STATUS_LOG = """
CREATE TABLE status_log (tbl TEXT, old TEXT, new TEXT);
CREATE TRIGGER payments_born AFTER INSERT ON payments
    BEGIN INSERT INTO status_log VALUES ('payments', NULL, new.status); END;
CREATE TRIGGER payments_moved AFTER UPDATE ON payments WHEN old.status IS NOT new.status
    BEGIN INSERT INTO status_log VALUES ('payments', old.status, new.status); END;
CREATE TRIGGER claims_born AFTER INSERT ON claims
    BEGIN INSERT INTO status_log VALUES ('claims', NULL, new.status); END;
CREATE TRIGGER claims_moved AFTER UPDATE ON claims WHEN old.status IS NOT new.status
    BEGIN INSERT INTO status_log VALUES ('claims', old.status, new.status); END;
"""


def _logged_ledger(path: Path) -> Path:
    Ledger(path, user="t").close()  # the schema, then the triggers on its tables
    with closing(sqlite3.connect(path)) as connection:
        connection.executescript(_STATUS_LOG)
    return path


def _undeclared(path: Path) -> tuple[list[tuple[str, str | None, str]], set[tuple[str, str]]]:
    """The logged writes no declared move or initial status allows, and the moves seen."""
    allowed = {"payments": (INITIAL, TRANSITIONS), "claims": (CLAIM_INITIAL, CLAIM_TRANSITIONS)}
    with closing(sqlite3.connect(path)) as connection:
        log = connection.execute("SELECT tbl, old, new FROM status_log").fetchall()
    wrong = []
    for table, old, new in log:
        initial, moves = allowed[table]
        ok = new in initial if old is None else old in moves.get(new, ())
        if not ok:
            wrong.append((table, old, new))
    return wrong, {(f"{t}:{old}", new) for t, old, new in log if old is not None}


def test_every_status_a_faulty_run_writes_is_an_initial_status_or_a_declared_move(tmp_path):
    # A batch on an emulator that settles and then answers 500, refuses settlements and
    # fails, run twice; then the ledger's own moves by hand.
    path = _logged_ledger(tmp_path / "ledger.sqlite")
    faults = settings(faults=Faults(paid_then_500_rate=0.25, settle_fail_rate=0.2, rate_5xx=0.1))
    prompts = [f"status {i}" for i in range(24)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xl.IncompleteBatchWarning)
        with xl.connect(ledger=path, emulator_settings=faults, budget=xl.Budget(usd=5)) as lab:
            for _ in range(2):
                lab.batch_chat(prompts, model=CHAT_MODEL, max_tokens=8, progress=None)
    ledger = Ledger(path, user="t")
    released = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=5, meta=meta("r"))
    ledger.release(released)
    expired = signed(ledger, "e", 10)
    ledger.record_unknown(expired, "lost")
    ledger.record_expired(expired)
    resent = signed(ledger, "s", 10)
    ledger.record_unknown(resent, "lost")
    ledger.record_resend(resent)
    ledger.record_settled(resent, tx_hash="0xabc", payer="0xPayer")
    claims = Claims(ledger.db)
    claims.claim("s", ["a", "b"])
    claims.release("s", ["a"], "no answer")
    claims.complete("s", [("a", b"late"), ("b", b"answer")], ledger_id=None)
    ledger.close()

    wrong, seen = _undeclared(path)
    assert not wrong, wrong
    # The run reached the moves that matter (so the check above saw real writes).
    assert {
        ("payments:signed", "settled"),
        ("payments:signed", "unknown"),
        ("payments:signed", "rejected"),
        ("payments:unknown", "settled"),
        ("payments:unknown", "expired"),
        ("payments:reserved", "released"),
        ("claims:pending", "done"),
        ("claims:pending", "unknown"),
        ("claims:pending", "failed"),
        ("claims:failed", "done"),
    } <= seen, sorted(seen)


def test_the_status_log_catches_a_write_outside_the_declared_moves(tmp_path):
    path = _logged_ledger(tmp_path / "ledger.sqlite")
    ledger = Ledger(path, user="t")
    row = signed(ledger, "k", 10)
    ledger.record_settled(row, tx_hash="0xabc", payer="0xPayer")
    ledger.close()
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE payments SET status = 'signed' WHERE id = ?", (row,))
    wrong, _ = _undeclared(path)
    assert wrong == [("payments", "settled", "signed")]


# -- the transition functions refuse what their table does not allow -------------------------


def test_the_declared_moves_cover_every_status_and_leave_final_ones_final():
    assert set(TRANSITIONS) | set(INITIAL) == set(PaymentStatus)
    assert set(CLAIM_TRANSITIONS) | set(CLAIM_INITIAL) == set(ClaimStatus)
    assert C.DONE not in {s for sources in CLAIM_TRANSITIONS.values() for s in sources}
    # move_payment's one-statement settle starts from in-flight rows only (UNRESOLVED).
    assert set(UNRESOLVED) <= set(TRANSITIONS[P.SETTLED])


def test_an_illegal_payment_move_raises_naming_row_and_statuses(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    good = signed(ledger, "k1", 10_000)
    released = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=5_000, meta=meta("k2"))
    ledger.release(released)
    before = ledger.budget_committed("b")
    with pytest.raises(
        xl.ConfigError, match=rf"ledger row {released} cannot move to 'settled' from 'released'"
    ):
        ledger.record_settled(released, tx_hash="0xabc", payer="0xPayer")
    # A bulk move with one illegal row moves none of them (the transaction rolls back).
    with (
        pytest.raises(
            xl.ConfigError, match=rf"ledger row {released} cannot move to 'failed' from 'released'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_payments(tx, [good, released], P.FAILED, 1, {"error": "no"})
    assert ledger.row(good)["status"] == "signed"
    assert ledger.row(released)["status"] == "released"
    assert ledger.budget_committed("b") == before == 10_000
    with pytest.raises(
        xl.ConfigError, match="ledger row 999 cannot move to 'expired' from 'missing'"
    ):
        ledger.record_expired(999)


def test_a_settled_payment_ignores_a_move_that_says_less(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    row = signed(ledger, "k", 10_000)
    ledger.record_settled(row, tx_hash=None, payer="0xPayer")
    ledger.record_unknown(row, "the answer was lost")
    ledger.record_failed(row, "late")
    with ledger.db.transaction() as tx:
        move_payments(tx, [row], P.SETTLED, 1, {"tx_hash": "0xfound"})
    found = ledger.row(row)
    assert (found["status"], found["tx_hash"], found["error"]) == ("settled", "0xfound", None)
    with pytest.raises(xl.ConfigError, match=rf"ledger row {row} cannot move to 'expired'"):
        ledger.record_expired(row)


def test_a_bulk_payment_move_keeps_held_and_the_running_total(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    rows = [signed(ledger, f"k{i}", 1_000 * (i + 1)) for i in range(4)]
    unsigned = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=50, meta=meta("r"))
    assert ledger.budget_committed("b") == 10_050
    with ledger.db.transaction() as tx:
        move_payments(tx, rows[:2], P.REJECTED, 7, {"error": "refused"})  # held: still counted
        move_payments(tx, rows[2:], P.EXPIRED, 7)
        move_payments(tx, [unsigned], P.RELEASED, 7)
    assert ledger.budget_committed("b") == 3_000 == ledger.budget_state("b").committed_atomic
    assert [ledger.row(r)["held"] for r in rows] == [True, True, False, False]


def test_a_new_row_starts_only_in_an_initial_status(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    with pytest.raises(xl.ConfigError, match="a new ledger row cannot start as 'settled'"):
        with ledger.db.transaction() as tx:
            insert_payment(tx, "b", 1, meta("k"), P.SETTLED, (1, "me", "t"))
    # scope, key, status, payment key, ledger id, floor, owner, label, times, error, answer
    row = ("s", "k", str(C.FAILED), "k", None, 0, "me", None, 1, 1, None, None)
    with pytest.raises(xl.ConfigError, match="a new claim row cannot start as 'failed'"):
        with ledger.db.transaction() as tx:
            insert_rows(tx, [row])
    assert ledger.rows() == [] and Claims(ledger.db).history() == []


def test_an_illegal_claim_move_raises_naming_row_and_statuses(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    claims = Claims(ledger.db, now=lambda: 1000.0)
    claimed = claims.claim("s", [f"k{i}" for i in range(3)])
    ids = [claimed[f"k{i}"].record.id for i in range(3)]
    claims.complete("s", [("k1", b"answer")], ledger_id=None)
    done = ids[1]
    # Done is final: moving it (alone or among legal moves) refuses, and nothing moves.
    with (
        pytest.raises(
            xl.ConfigError,
            match=rf"claim row {done} \(s 'k1'\) cannot move to 'failed' from 'done'",
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(i, "gave up") for i in ids], C.FAILED, 5, sets="error = ?")
    assert [claims.get("s", [k])[k].status for k in ("k0", "k1", "k2")] == [
        "pending",
        "done",
        "pending",
    ]
    with (
        pytest.raises(
            xl.ConfigError, match=rf"claim row {done} \(s 'k1'\) cannot move to 'done' from 'done'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(done,)], C.DONE, 5)
    with (
        pytest.raises(
            xl.ConfigError, match="claim row 999 cannot move to 'unknown' from 'missing'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(999,)], C.UNKNOWN, 5)
    with pytest.raises(xl.ConfigError, match="sets status and updated_us itself"):
        with ledger.db.transaction() as tx:
            move_claims(tx, [(ids[0], "done")], C.FAILED, 5, sets="status = ?")


def test_a_bulk_claim_move_reads_nothing_per_row(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    claims = Claims(ledger.db)
    keys = [f"k{i}" for i in range(3_000)]
    claims.claim("s", keys)
    assert set(claims.release("s", keys, "no answer").values()) == {C.FAILED}
    statements: list[str] = []
    ledger.db._db.set_trace_callback(statements.append)
    try:
        assert len(claims.complete("s", [(k, b"a") for k in keys])) == len(keys)
    finally:
        ledger.db._db.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) <= 3 * len(keys) // 500, len(reads)  # a few reads per chunk of 500
    assert sum(s.startswith("UPDATE claims SET status") for s in statements) == len(keys)
    assert {r.status for r in claims.all("s")} == {C.DONE}


def test_a_bulk_settle_of_rows_in_flight_is_one_statement(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    rows = [signed(ledger, f"k{i}", 1_000) for i in range(3)]
    ledger.record_unknown(rows[1], "dropped")
    statements: list[str] = []
    ledger.db._db.set_trace_callback(statements.append)
    try:
        with ledger.db.transaction() as tx:
            move_payments(tx, rows, P.SETTLED, 9, {"tx_hash": "0xt", "payer": "0xPayer"})
    finally:
        ledger.db._db.set_trace_callback(None)
    assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE", "COMMIT"]
    assert {(ledger.row(r)["status"], ledger.row(r)["tx_hash"]) for r in rows} == {
        ("settled", "0xt")
    }
    # Settled already (a receipt without its hash) among rows in flight: the full rules.
    late = signed(ledger, "late", 1_000)
    ledger.record_settled(late, tx_hash=None, payer="0xPayer")
    more = signed(ledger, "more", 1_000)
    with ledger.db.transaction() as tx:
        move_payments(tx, [late, more], P.SETTLED, 10, {"tx_hash": "0xu"})
    assert [ledger.row(r)["tx_hash"] for r in (late, more)] == ["0xu", "0xu"]
    assert ledger.budget_committed("b") == 5_000 == ledger.budget_state("b").settled_atomic
