"""Payee pinning end to end: a gateway whose payTo differs from the pinned one is refused,
with a ``refused`` ledger row and nothing signed (docs/money.md, rule 1)."""

from __future__ import annotations

import pytest
from support.client import CHAT_MODEL, settings

import x402lab as xl
from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import RECEIVER_ADDRESS

OTHER_RECEIVER = "0x" + "ab" * 20


def _assert_refused_unsigned(lab, emulator, pay_to: str) -> None:
    (row,) = [r for r in lab.ledger.rows() if r["status"] != "settled"]
    assert row["status"] == "refused"
    assert row["pay_to"].lower() == pay_to.lower()
    assert row["nonce"] is None and row["payer"] is None  # nothing was signed
    assert "differs from pinned payee" in row["error"]
    assert emulator.chain.transfers() == []  # nothing moved on the other service's chain


def test_payee_given_to_connect_is_enforced(emulator_factory, tmp_path):
    other = emulator_factory(pay_to=OTHER_RECEIVER)
    with xl.connect(
        other.gateway_url,
        wallet=xl.Wallet.create(),
        ledger=tmp_path / "ledger.sqlite",
        pay_to={"gateway": RECEIVER_ADDRESS},
    ) as lab:
        with pytest.raises(xl.PaymentRefused, match="differs from pinned payee"):
            lab.chat("hi", model=CHAT_MODEL, max_tokens=5)
        _assert_refused_unsigned(lab, other, OTHER_RECEIVER)
        # A free quote still works: it signs nothing.
        assert lab.quote("POST", "/api/v1/augment/search", {"query": "x"}).pay_to == OTHER_RECEIVER


def test_first_payee_seen_is_pinned_when_the_service_changes(emulator_factory, tmp_path):
    first = emulator_factory()
    lab = xl.connect(
        first.gateway_url, wallet=xl.Wallet.create(), ledger=tmp_path / "ledger.sqlite"
    )
    try:
        paid = lab.chat("hi", model=CHAT_MODEL, max_tokens=5)
        assert paid.cost.pay_to == RECEIVER_ADDRESS
        # The same address starts answering with another receiver.
        port = int(first.gateway_url.rsplit(":", 1)[1])
        first.stop()
        second = start_emulator(settings(pay_to=OTHER_RECEIVER), gateway_port=port)
        try:
            with pytest.raises(xl.PaymentRefused, match="differs from pinned payee"):
                lab.chat("hi again", model=CHAT_MODEL, max_tokens=5)
            _assert_refused_unsigned(lab, second, OTHER_RECEIVER)
        finally:
            second.stop()
    finally:
        lab.close()
