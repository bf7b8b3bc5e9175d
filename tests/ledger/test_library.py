"""The report library in the store (``x402lab.ledger.library``): never two payments for one
report unless asked, owned reports with their money joined from the ledger."""

from __future__ import annotations

import pytest
from support.ledger import settled, signed

from x402lab.errors import PaymentRefused
from x402lab.ledger import Claims, Ledger, ReportLibrary

SOURCE = "http://reports.test/"
UNIT = 10_000


def snapshot(report_id: str, created: str) -> dict:
    return {"id": report_id, "createdAt": created, "body": "…", "someNewField": [1, 2]}


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite")


def buy(library: ReportLibrary, ledger: Ledger, handle: str, reports: list[dict]) -> list[str]:
    order = library.claim(handle, [r["id"] for r in reports], f"username={handle}")
    row = settled(ledger, order.request_key, UNIT * len(reports))
    return library.complete(
        order, reports, ledger_id=row, receipt={"success": True}, charged_usd=0.01 * len(reports),
        response_text='{"reports": "as received"}',
    )  # fmt: skip


def test_bought_reports_are_owned_with_their_money_joined(ledger):
    library = ReportLibrary(ledger, SOURCE)
    reports = [snapshot("r1", "2025-01-01"), snapshot("r2", "2025-03-01")]
    assert buy(library, ledger, "alice", reports) == ["r1", "r2"]
    assert library.owned("alice") == {"r1", "r2"} and library.owned("bob") == set()
    records = library.records("alice")
    assert [r["report_id"] for r in records] == ["r2", "r1"]  # newest report first
    [row] = ledger.rows()
    first = records[0]
    assert first["snapshot"] == reports[1]  # exactly as received, unknown fields kept
    assert (first["ledger_id"], first["tx_hash"], first["price_atomic"]) == (
        row["id"],
        row["tx_hash"],
        UNIT,
    )
    assert first["order_id"] == 1 and first["first_party"] is False
    [order] = library.orders()
    assert (order["status"], order["paid_atomic"], order["ledger_id"]) == (
        "done",
        2 * UNIT,
        row["id"],
    )
    assert order["request_key"] == "report-order:1" == row["request_key"]
    assert order["report_ids"] == ["r1", "r2"] and order["charged_usd"] == 0.02
    assert library.records(ids=["r1"])[0]["report_id"] == "r1"


def test_a_pending_purchase_blocks_another_one_for_the_same_reports(ledger):
    library = ReportLibrary(ledger, SOURCE)
    library.claim("alice", ["r1", "r2"], "q")
    elsewhere = ReportLibrary(ledger, SOURCE, claims=Claims(ledger.db, owner="other:2:2"))
    with pytest.raises(PaymentRefused, match="does not pay for the same reports twice") as info:
        elsewhere.claim("alice", ["r2", "r3"], "q")
    assert "still in progress" in str(info.value) and "rebuy=True" in str(info.value)
    assert info.value.details == {"order_id": 1, "status": "pending"}
    assert len(library.orders()) == 1  # the refused purchase left nothing behind
    elsewhere.claim("alice", ["r3"], "q")  # other reports are free to buy


def test_a_failed_purchase_can_be_bought_again(ledger):
    library = ReportLibrary(ledger, SOURCE)
    order = library.claim("alice", ["r1"], "q")
    assert library.close_failed(order, "HTTP 400") == "failed"
    assert buy(library, ledger, "alice", [snapshot("r1", "2025-01-01")]) == ["r1"]
    assert [o["status"] for o in library.orders()] == ["failed", "done"]
    assert library.orders()[0]["error"] == "HTTP 400"


def test_an_unclear_purchase_is_paid_again_only_with_rebuy(ledger):
    library = ReportLibrary(ledger, SOURCE)
    order = library.claim("alice", ["r1", "r2"], "q")
    row = signed(ledger, order.request_key, 2 * UNIT)
    ledger.record_unknown(row, "HTTP 409 payment_already_used")
    assert library.close_failed(order, "409") == "unknown"
    with pytest.raises(PaymentRefused, match="may have settled"):
        library.claim("alice", ["r2"], "q")
    again = library.claim("alice", ["r2"], "q", rebuy=True)
    assert again.request_key == "report-order:2"  # the refused attempt left nothing behind
    statuses = [o["status"] for o in library.orders()]
    assert statuses == ["unknown", "pending"]
    assert library.orders()[0]["paid_atomic"] is None  # not known to be paid: null, not 0


def test_first_party_reads_cost_nothing(ledger):
    library = ReportLibrary(ledger, SOURCE)
    order = library.claim("alice", ["r1"], "q", first_party=True)
    library.complete(
        order, [snapshot("r1", "2025-01-01")], ledger_id=None, receipt=None, charged_usd=0,
        response_text="{}",
    )  # fmt: skip
    [record] = library.records()
    assert (record["first_party"], record["price_atomic"], record["ledger_id"]) == (True, 0, None)
    assert library.orders()[0]["paid_atomic"] == 0


def test_the_first_copy_is_kept_and_reports_missing_from_the_answer_stay_buyable(ledger):
    library = ReportLibrary(ledger, SOURCE)
    buy(library, ledger, "alice", [snapshot("r1", "2025-01-01")])
    order = library.claim("alice", ["r2", "r3"], "q")
    row = settled(ledger, order.request_key, 2 * UNIT)
    later = {**snapshot("r1", "2025-01-01"), "body": "edited later"}
    stored = library.complete(
        order, [later, snapshot("r2", "2025-01-02")], ledger_id=row, receipt=None,
        charged_usd=None, response_text="{}",
    )  # fmt: skip
    assert stored == ["r2"]
    assert library.records(ids=["r1"])[0]["snapshot"]["body"] == "…"
    assert library.owned("alice") == {"r1", "r2"}
    library.claim("alice", ["r3"], "q")  # not delivered: buyable, nothing blocks it
