"""One status vocabulary: the enum's groups are coherent, and SQL never spells them by hand."""

from __future__ import annotations

import re
from pathlib import Path

import x402lab
from x402lab.ledger import statuses
from x402lab.ledger.statuses import (
    COUNTING,
    FINAL,
    FREED,
    HOLDABLE,
    IN_FLIGHT,
    MAYBE_PAID,
    TRANSITIONS,
    PaymentStatus,
    any_sql,
    counted_sql,
    in_sql,
)

P = PaymentStatus
ROOT = Path(x402lab.__file__).parent
# Files whose SQL takes its status lists from statuses.py.
STORE_FILES = sorted((ROOT / "ledger").glob("*.py")) + [ROOT / "analysis" / "spend.py"]


def test_the_groups_of_design_section_3():
    assert [str(s) for s in PaymentStatus] == [
        "reserved", "signed", "settled", "rejected", "failed",
        "unknown", "released", "refused", "expired",
    ]  # fmt: skip
    assert set(COUNTING) == {P.RESERVED, P.SIGNED, P.SETTLED, P.UNKNOWN}
    assert set(MAYBE_PAID) == {P.SIGNED, P.SETTLED, P.UNKNOWN}
    assert set(IN_FLIGHT) <= set(COUNTING) and set(MAYBE_PAID) <= set(COUNTING)
    assert set(FREED) == set(PaymentStatus) - set(COUNTING)
    assert P.EXPIRED in FREED and set(HOLDABLE) <= set(FREED)


def test_final_statuses_have_no_way_out_and_every_move_starts_somewhere_open():
    for target, sources in TRANSITIONS.items():
        assert not set(sources) & set(FINAL), target
    assert set(TRANSITIONS) | {P.RESERVED, P.REFUSED} == set(PaymentStatus)


def test_sql_helpers_write_the_groups():
    assert in_sql("status", MAYBE_PAID) == "status IN ('signed', 'settled', 'unknown')"
    assert any_sql("status", (P.SIGNED, P.UNKNOWN)) == "(status = 'signed' OR status = 'unknown')"
    assert counted_sql("p.") == (
        "(p.status IN ('reserved', 'signed', 'settled', 'unknown') OR p.held = 1)"
    )


def test_no_sql_in_the_store_spells_a_status_list_by_hand():
    names = "|".join(str(s) for s in (*PaymentStatus, *statuses.ClaimStatus))
    by_hand = re.compile(rf"""IN\s*\(\s*['"]({names})['"]""", re.IGNORECASE)
    for path in STORE_FILES:
        text = path.read_text()
        assert not by_hand.search(text), f"{path.name} spells a status list in SQL"
    # A status compared in SQL comes from the enum: no quoted status after "status =".
    literal = re.compile(rf"status\s*(=|!=|<>)\s*'({names})'")
    for path in STORE_FILES:
        found = literal.findall(path.read_text())
        assert not found, f"{path.name} compares a status literal in SQL: {found}"
