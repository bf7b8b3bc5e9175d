"""The answers of one paid request stored together (``ledger.packs``), on a SQLite file and on
PostgreSQL: one pack row, each claim pointing at its slice, read back as the bytes written;
the rules of ``complete`` unchanged (a done key keeps its first answer, a key never claimed
gets a done row); a single answer, and unpacked calls, stay inline."""

from __future__ import annotations

import pytest
from support.ledger import settled

from x402lab.ledger import ClaimAction, Claims, Ledger

SCOPE = "batch:embed"


@pytest.fixture
def ledger(ledger_url: str) -> Ledger:
    """A ledger on each backend: a SQLite file, then a PostgreSQL database."""
    return Ledger(ledger_url)


def answer(i: int, size: int = 4104) -> bytes:
    """A distinct answer of ``size`` bytes (of an embedding's size by default)."""
    return bytes((i * 31 + j) % 251 for j in range(size))


def packed_rows(ledger: Ledger) -> list[tuple[str, object, object, object, object]]:
    return [
        tuple(row)
        for row in ledger.db.read(
            "SELECT key, answer, pack_id, pack_offset, pack_length FROM claims ORDER BY id"
        )
    ]


def complete_packed(ledger: Ledger, claims: Claims, answers, payment_key: str) -> list[str]:
    with ledger.db.transaction() as tx:
        return claims.complete_in(tx, SCOPE, answers, payment_key=payment_key, packed=True)


def test_one_request_is_one_pack_and_each_answer_reads_back_as_written(ledger):
    claims = Claims(ledger.db)
    keys = [f"item-{i}" for i in range(5)]
    claims.claim(SCOPE, keys, payment_key="req-1")
    row = settled(ledger, "req-1")
    # Sizes differ on purpose: each slice is its own offset and length, not a fixed stride.
    answers = [(key, answer(i, 4104 + i)) for i, key in enumerate(keys)]
    assert complete_packed(ledger, claims, answers, "req-1") == keys

    (pack,) = ledger.db.read("SELECT id, payment_key, body FROM answer_packs")
    assert pack["payment_key"] == "req-1"
    assert bytes(pack["body"]) == b"".join(a for _, a in answers)
    rows = packed_rows(ledger)
    assert all(r[1] is None and r[2] == pack["id"] for r in rows)  # nothing inline
    assert [(r[3], r[4]) for r in rows] == [
        (sum(4104 + j for j in range(i)), 4104 + i) for i in range(5)
    ]
    got = claims.claim(SCOPE, keys)
    assert {k: (c.action, c.record.answer) for k, c in got.items()} == {
        k: (ClaimAction.REUSE, a) for k, a in answers
    }
    assert all(c.record.ledger_id == row for c in got.values())
    # Every reader of claims sees the same bytes.
    assert {k: r.answer for k, r in claims.get(SCOPE, keys).items()} == dict(answers)
    assert [r.answer for r in claims.all(SCOPE)] == [a for _, a in answers]
    assert [r.answer for r in claims.history(SCOPE)] == [a for _, a in answers]


def test_a_done_key_keeps_its_first_answer_and_a_fresh_key_is_packed(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["a", "b"], payment_key="req-1")
    settled(ledger, "req-1")
    complete_packed(ledger, claims, [("a", answer(1)), ("b", answer(2))], "req-1")
    claims.claim(SCOPE, ["c"], payment_key="req-2")
    settled(ledger, "req-2")
    # "a" is done already (kept, not in the new pack); "fresh" was never claimed.
    stored = complete_packed(
        ledger, claims, [("a", answer(9)), ("c", answer(3)), ("fresh", answer(4))], "req-2"
    )
    assert stored == ["c", "fresh"]
    bodies = [bytes(r[0]) for r in ledger.db.read("SELECT body FROM answer_packs ORDER BY id")]
    assert bodies == [answer(1) + answer(2), answer(3) + answer(4)]
    got = claims.get(SCOPE, ["a", "b", "c", "fresh"])
    assert {k: r.answer for k, r in got.items()} == {
        "a": answer(1),
        "b": answer(2),
        "c": answer(3),
        "fresh": answer(4),
    }
    assert got["fresh"].status == "done" and got["fresh"].payment_key == "req-2"


def test_one_answer_alone_and_unpacked_calls_stay_inline(ledger):
    claims = Claims(ledger.db)
    claims.claim(SCOPE, ["one"], payment_key="req-1")
    complete_packed(ledger, claims, [("one", answer(1))], "req-1")
    claims.claim("batch:chat", ["x", "y"], payment_key="req-2")
    claims.complete("batch:chat", [("x", b'["hi"]'), ("y", b'["yo"]')], payment_key="req-2")
    assert ledger.db.read("SELECT COUNT(*) FROM answer_packs")[0][0] == 0
    rows = {r[0]: r[1:] for r in packed_rows(ledger)}
    assert rows == {
        "one": (answer(1), None, None, None),
        "x": (b'["hi"]', None, None, None),
        "y": (b'["yo"]', None, None, None),
    }
    assert claims.get(SCOPE, ["one"])["one"].answer == answer(1)
