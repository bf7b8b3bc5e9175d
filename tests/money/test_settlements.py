"""Money rule 7 on the wire: the paid reply carries its settlement uncommitted when its caller
stores the answer (``CallInfo.stores_answer``), and the caller commits both in one
transaction; a plain call's settlement is committed by the payer when the receipt arrives;
a settled answer whose body is lost is committed alone and never paid again."""

from __future__ import annotations

import pytest

import x402lab as xl
from x402lab.gateway.paid import request_key
from x402lab.ledger import Claims, answer_transaction
from x402lab.payments import CallInfo

CHAT = "/api/v1/chat/completions"
CHAT_MODEL = "zai-org-glm-4.7-flash"


def _body(prompt: str) -> dict[str, object]:
    return {"model": CHAT_MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": 8}


def _send(lab, body: dict[str, object], *, stores_answer: bool):
    call = CallInfo(
        "gateway", "POST", CHAT, CHAT_MODEL, request_key("POST", CHAT, body),
        stores_answer=stores_answer,
    )  # fmt: skip
    return xl.run(lab.async_.session.client("gateway").send("POST", CHAT, call=call, json=body))


def _status_elsewhere(path, row_id: int) -> str:
    """The row's status as another connection sees it (committed writes only)."""
    other = xl.Ledger(path)
    try:
        found = other.row(row_id)
        assert found is not None
        return str(found["status"])
    finally:
        other.close()


def test_a_caller_that_stores_the_answer_gets_the_settlement_to_commit_with_it(start, lab_for):
    emulator = start()
    lab = lab_for(emulator)
    body = _body("Store me with my settlement")
    reply = _send(lab, body, stores_answer=True)
    assert reply.cost is not None and reply.cost.status == "settled"
    settlement = reply.settlement
    assert settlement is not None and not settlement.committed
    row = reply.cost.ledger_id
    assert settlement.row_id == row
    # Paid on the chain, not yet settled in the ledger: the caller commits it.
    assert len(emulator.chain.transfers()) == 1
    assert _status_elsewhere(lab.ledger.path, row) == "signed"
    key = request_key("POST", CHAT, body)
    with answer_transaction(lab.ledger.db, settlement) as tx:
        Claims(lab.ledger.db).complete_in(tx, "test", [(key, reply.response.content)])
    assert settlement.committed and _status_elsewhere(lab.ledger.path, row) == "settled"
    [claim] = Claims(lab.ledger.db).history("test", key)
    assert claim.status == "done" and claim.ledger_id == row


def test_a_plain_call_is_settled_by_the_payer_when_the_receipt_arrives(start, lab_for):
    emulator = start()
    lab = lab_for(emulator)
    reply = _send(lab, _body("Nothing stored for me"), stores_answer=False)
    assert reply.settlement is None  # nothing left for the caller to commit
    assert reply.cost is not None and reply.cost.status == "settled"
    assert _status_elsewhere(lab.ledger.path, reply.cost.ledger_id) == "settled"


@pytest.mark.parametrize("stores_answer", [False, True])
def test_a_settled_answer_whose_body_is_lost_is_never_paid_again(start, lab_for, stores_answer):
    # The receipt comes with the headers, the body half a second later: the client stops
    # reading before it arrives. The payment settled; asking again unpaid would pay twice.
    emulator = start(answer_delay_s=0.5)
    lab = lab_for(emulator, timeout_s=0.2)
    with pytest.raises(xl.AnswerLost, match="settled") as raised:
        _send(lab, _body("My body is late"), stores_answer=stores_answer)
    assert raised.value.details["settled"] is True
    assert len(emulator.chain.transfers()) == 1
    [row] = lab.ledger.rows()
    assert row["status"] == "settled" and row["id"] == raised.value.details["ledger_id"]
    assert _status_elsewhere(lab.ledger.path, row["id"]) == "settled"
