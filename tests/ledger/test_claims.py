"""The claim state machine (``x402lab.ledger.claims``) on a SQLite file and on PostgreSQL.

Every transition: pending -> done | failed | unknown, unknown -> done, a failed attempt that
changes nothing, ``rebuy``, the takeover of a stale claim, payments made outside any claim,
bulk calls, and processes racing for one key (exactly one pays).
"""

from __future__ import annotations

import queue

import pytest
from support.ledger import claim_and_pay, meta, settled, signed
from support.processes import racing

from x402lab.ledger import ClaimAction, Claims, ClaimStatus, Ledger

A = ClaimAction
SCOPE = "batch:chat"


@pytest.fixture
def ledger(ledger_url: str) -> Ledger:
    """A ledger on each backend: a SQLite file, then a PostgreSQL database."""
    return Ledger(ledger_url)


def at(clock: list[float]):
    return lambda: clock[0]


def test_first_claim_pays_and_a_second_caller_waits(ledger):
    mine, other = Claims(ledger.db), Claims(ledger.db, owner="host:2:1")
    first = mine.claim(SCOPE, ["k"])["k"]
    assert first.action is A.PAY
    assert first.record.status is ClaimStatus.PENDING and first.record.owner == mine.owner
    assert first.record.payment_key == "k"  # by default a key is its own payment key
    assert other.claim(SCOPE, ["k"])["k"].action is A.WAIT
    assert mine.claim(SCOPE, ["k"])["k"].action is A.WAIT  # its own live claim too
    assert other.claim("batch:embed", ["k"])["k"].action is A.PAY  # scopes are separate


def test_done_is_reused_with_its_answer_and_the_joined_payment(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["k"], payment_key="req-1")
    row = settled(ledger, "req-1", 12_345)
    assert claims.complete(SCOPE, [("k", b"hello")]) == ["k"]
    got = claims.claim(SCOPE, ["k"])["k"]
    assert got.action is A.REUSE
    record = got.record
    assert (record.status, record.answer, record.ledger_id) == ("done", b"hello", row)
    # Money is read from the ledger, never copied: the join shows the payment as it is.
    assert (record.payment_status, record.amount_atomic) == ("settled", 12_345)
    assert record.tx_hash == f"0xtx{row}"


def test_release_without_a_payment_that_left_is_failed_and_the_next_caller_pays(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["k"])
    # A reservation given back never left the process: not a reason to block.
    rid = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=5, meta=meta("k"))
    ledger.release(rid)
    assert claims.release(SCOPE, ["k"], "refused by the budget") == {"k": ClaimStatus.FAILED}
    again = claims.claim(SCOPE, ["k"])["k"]
    assert again.action is A.PAY
    assert [r.status for r in claims.history(SCOPE)] == ["failed", "pending"]


def test_release_after_a_signed_payment_is_unknown_and_never_paid_again_alone(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["k"])
    row = signed(ledger, "k")
    ledger.record_unknown(row, "connection dropped after sending")
    assert claims.release(SCOPE, ["k"], "dropped") == {"k": ClaimStatus.UNKNOWN}
    got = Claims(ledger.db, owner="other:1:1").claim(SCOPE, ["k"])["k"]
    assert got.action is A.MAYBE_PAID
    assert (got.record.ledger_id, got.record.payment_status) == (row, "unknown")
    # Reconciliation later finds it settled: the claim shows it through the join.
    ledger.record_settled(row, tx_hash="0xfound", payer="0xPayer")
    assert claims.get(SCOPE, ["k"])["k"].payment_status == "settled"


def test_payments_from_before_the_claim_do_not_make_a_release_unknown(ledger):
    claims = Claims(ledger.db)
    settled(ledger, "k")  # an earlier purchase of the same request, bought again on purpose
    claims.claim(SCOPE, ["k"], rebuy=True)
    assert claims.release(SCOPE, ["k"], "refused") == {"k": ClaimStatus.FAILED}


def test_a_late_answer_turns_unknown_into_done(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["k"])
    row = signed(ledger, "k")
    claims.release(SCOPE, ["k"], "timeout")
    ledger.record_settled(row, tx_hash="0x1", payer="0xPayer")
    assert claims.complete(SCOPE, [("k", b"late")]) == ["k"]
    got = claims.claim(SCOPE, ["k"])["k"]
    assert (got.action, got.record.answer, got.record.ledger_id) == (A.REUSE, b"late", row)


def test_an_answer_once_stored_is_kept(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["k"])
    claims.complete(SCOPE, [("k", b"first")])
    assert claims.complete(SCOPE, [("k", b"second")]) == []
    assert claims.get(SCOPE, ["k"])["k"].answer == b"first"


def test_rebuy_is_the_one_override(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["done", "unknown"])
    claims.complete(SCOPE, [("done", b"old")])
    signed(ledger, "unknown")
    claims.release(SCOPE, ["unknown"], "timeout")
    got = claims.claim(SCOPE, ["done", "unknown"], rebuy=True)
    assert {k: c.action for k, c in got.items()} == {"done": A.PAY, "unknown": A.PAY}
    # A live pending claim of another caller is waited for, even by a rebuy.
    assert Claims(ledger.db, owner="o:1:1").claim(SCOPE, ["done"], rebuy=True)["done"].action == (
        A.WAIT
    )
    claims.complete(SCOPE, [("done", b"new")])
    assert claims.claim(SCOPE, ["done"])["done"].record.answer == b"new"


def test_a_failed_rebuy_leaves_the_earlier_outcome_in_force(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["done", "unknown"])
    claims.complete(SCOPE, [("done", b"kept")])
    signed(ledger, "unknown")
    claims.release(SCOPE, ["unknown"], "timeout")
    claims.claim(SCOPE, ["done", "unknown"], rebuy=True)
    claims.release(SCOPE, ["done", "unknown"], "refused before signing")
    got = claims.claim(SCOPE, ["done", "unknown"])
    assert (got["done"].action, got["done"].record.answer) == (A.REUSE, b"kept")
    assert got["unknown"].action is A.MAYBE_PAID
    current = {r.key: r.status for r in claims.all(SCOPE)}
    assert current == {"done": "done", "unknown": "unknown"}


def test_a_payment_made_without_a_claim_is_maybe_paid(ledger):
    row = settled(ledger, "req")  # e.g. by an older x402lab, or a generic paid call
    claims = Claims(ledger.db)
    got = claims.claim(SCOPE, ["a", "b"], payment_key="req")
    assert {c.action for c in got.values()} == {A.MAYBE_PAID}
    assert got["a"].record.ledger_id == row and got["a"].record.status == "unknown"
    assert claims.claim(SCOPE, ["a"], payment_key="req", rebuy=True)["a"].action is A.PAY


def test_a_stale_claim_of_a_stopped_process_is_taken_over(ledger):
    clock = [1000.0]
    gone = Claims(ledger.db, owner="dead:7:1", now=at(clock), stale_after_s=60)
    gone.claim(SCOPE, ["k"])
    me = Claims(ledger.db, now=at(clock), stale_after_s=60)
    clock[0] += 30
    assert me.claim(SCOPE, ["k"])["k"].action is A.WAIT  # young: its owner may be paying
    clock[0] += 60
    got = me.claim(SCOPE, ["k"])["k"]
    assert got.action is A.PAY and got.record.owner == me.owner
    old, new = me.history(SCOPE, "k")
    assert old.status == "failed" and "abandoned" in (old.error or "")
    assert new.status == "pending"
    # The old owner's release cannot touch the claim that is no longer its own.
    assert gone.release(SCOPE, ["k"], "late") == {"k": ClaimStatus.PENDING}


def test_a_stale_claim_whose_payment_left_becomes_unknown(ledger):
    clock = [1000.0]
    gone = Claims(ledger.db, owner="dead:7:1", now=at(clock), stale_after_s=60)
    gone.claim(SCOPE, ["k"])
    row = signed(ledger, "k")  # signed, then the process died before any answer
    clock[0] += 3600
    got = Claims(ledger.db, now=at(clock), stale_after_s=60).claim(SCOPE, ["k"])["k"]
    assert got.action is A.MAYBE_PAID
    assert (got.record.status, got.record.ledger_id) == ("unknown", row)


def test_a_stale_claim_whose_owner_holds_a_reservation_is_waited_for(ledger):
    clock = [1000.0]
    slow = Claims(ledger.db, owner="slow:7:1", now=at(clock), stale_after_s=60)
    slow.claim(SCOPE, ["k"])
    ledger.reserve(budget="b", cap_atomic=None, amount_atomic=5, meta=meta("k"))
    clock[0] += 3600
    me = Claims(ledger.db, now=at(clock), stale_after_s=60)
    assert me.claim(SCOPE, ["k"])["k"].action is A.WAIT  # it is between reserve and sign


def test_a_stale_claim_of_this_process_is_waited_for(ledger):
    clock = [1000.0]
    claims = Claims(ledger.db, now=at(clock), stale_after_s=60)
    claims.claim(SCOPE, ["k"])
    clock[0] += 3600
    assert claims.claim(SCOPE, ["k"])["k"].action is A.WAIT


def test_renew_keeps_a_claim_from_going_stale(ledger):
    clock = [1000.0]
    mine = Claims(ledger.db, now=at(clock), stale_after_s=60)
    other = Claims(ledger.db, owner="o:1:1", now=at(clock), stale_after_s=60)
    mine.claim(SCOPE, ["a", "b"])
    clock[0] += 50
    assert mine.renew(SCOPE, ["a", "b", "never-claimed"]) == ["a", "b"]
    clock[0] += 50
    assert {c.action for c in other.claim(SCOPE, ["a", "b"]).values()} == {A.WAIT}
    clock[0] += 61
    assert other.claim(SCOPE, ["a"])["a"].action is A.PAY  # not renewed: taken over
    assert mine.renew(SCOPE, ["a", "b"]) == ["b"]


def test_packed_keys_share_one_payment_key(ledger):
    claims = Claims(ledger.db)
    units = {"item-1": "unit-A", "item-2": "unit-A", "item-3": "unit-B"}
    got = claims.claim(SCOPE, list(units), payment_key=units)
    assert {k: c.record.payment_key for k, c in got.items()} == units
    row = signed(ledger, "unit-A")
    ledger.record_unknown(row, "timeout")
    released = claims.release(SCOPE, list(units), "the batch was interrupted")
    assert released == {"item-1": "unknown", "item-2": "unknown", "item-3": "failed"}
    regrouped = claims.claim(SCOPE, list(units), payment_key="unit-C")
    assert {k: c.action for k, c in regrouped.items()} == {
        "item-1": A.MAYBE_PAID,
        "item-2": A.MAYBE_PAID,
        "item-3": A.PAY,
    }


def test_complete_finds_the_payment_and_accepts_keys_never_claimed(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["a"], payment_key="req")
    refused = ledger.record_refused(
        budget="b", amount_atomic=1, meta=meta("req"), error="over the cap"
    )
    row = settled(ledger, "req", 7_000)
    assert claims.complete(SCOPE, [("a", b"1"), ("extra", b"2")], payment_key="req") == [
        "a",
        "extra",
    ]
    records = claims.get(SCOPE, ["a", "extra"])
    assert {r.ledger_id for r in records.values()} == {row} != {refused}
    assert records["extra"].status == "done"


def test_thousands_of_keys_in_one_call(ledger):
    claims = Claims(ledger.db)
    keys = [f"item-{i}" for i in range(5000)]
    got = claims.claim(SCOPE, keys, payment_key={k: f"unit-{i // 8}" for i, k in enumerate(keys)})
    assert list(got) == keys and {c.action for c in got.values()} == {A.PAY}
    ids = [c.record.id for c in got.values()]
    assert ids == sorted(ids) and len(set(ids)) == 5000
    assert len(claims.complete(SCOPE, [(k, k.encode()) for k in keys[:3000]])) == 3000
    assert len(claims.release(SCOPE, keys, "stopped")) == 5000
    again = claims.claim(SCOPE, keys)
    assert sum(c.action is A.REUSE for c in again.values()) == 3000
    assert sum(c.action is A.PAY for c in again.values()) == 2000
    assert again["item-5"].record.answer == b"item-5"
    assert len(claims.all(SCOPE)) == 5000


def test_processes_racing_for_one_key_pay_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    Ledger(path).close()
    context = racing()
    results = context.Queue()
    procs = [
        context.Process(target=claim_and_pay, args=(path, SCOPE, "the-key", results))
        for _ in range(6)
    ]
    for proc in procs:
        proc.start()
    outcomes = []
    for _ in procs:
        try:
            outcomes.append(results.get(timeout=60))
        except queue.Empty:
            pytest.fail("a claimer did not finish")
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert sum(paid for _, paid, _ in outcomes) == 1
    assert len({answer for _, _, answer in outcomes}) == 1
    rows = Ledger(path).rows(where="request_key = ?", params=("the-key",))
    assert [r["status"] for r in rows] == ["settled"]
