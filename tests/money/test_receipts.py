"""A receipt is checked against what was signed: a ``PAYMENT-RESPONSE`` naming another payer,
network or amount, or a transaction that is no transaction hash, is never recorded as it
says. The row stays ``unknown`` (SettlementUnknown) and
``reconcile()`` settles it from the chain, with the real payer and transaction."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.hostile import hostile_server
from support.prepay import CHAT_MODEL

import x402lab as xl

PAYER = xl.Wallet.from_key("0x" + "5a" * 32).address  # the money fixtures' wallet
OTHER = "0x000000000000000000000000000000000000dEaD"


@pytest.mark.parametrize(
    ("receipt", "named"),
    [
        ({"payer": OTHER}, "payer"),
        ({"network": "eip155:1"}, "network"),
        ({"amount": "1"}, "amount"),
        ({"transaction": "not-a-hash"}, "transaction"),
    ],
    ids=["payer", "network", "amount", "transaction"],
)
def test_a_receipt_that_contradicts_the_payment_leaves_it_unknown(start, lab_for, receipt, named):
    emulator = start()
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(receipt=receipt)
        through = SimpleNamespace(gateway_url=hostile.url, reports_url=emulator.reports_url)
        lab = lab_for(through, chain_rpc_url=emulator.chain_url)
        with pytest.raises(xl.SettlementUnknown, match=f"receipt does not match.*{named}"):
            lab.chat("hello", model=CHAT_MODEL, max_tokens=8)
        (row,) = lab.ledger.rows()
        assert row["status"] == "unknown" and row["tx_hash"] is None
        assert row["payer"] == PAYER
        changed = lab.reconcile()  # the chain knows the nonce this lab signed
        assert changed["after"].tolist() == ["settled"]
        assert len({p["payload"]["authorization"]["nonce"] for p in hostile.payments}) == 1
        (transfer,) = emulator.chain.transfers()
        (row,) = lab.ledger.rows()
        assert row["status"] == "settled" and row["tx_hash"] == transfer.tx_hash
        assert row["payer"] == PAYER
