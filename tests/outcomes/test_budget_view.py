"""What the user sees of money not yet known: ``lab.budget`` shows spent, held (signed and
not yet known, and refused but still valid) and free; ``lab.spend()`` agrees; the cost
report has a reconciliation table."""

from __future__ import annotations

import pandas as pd
import pytest
from support.outcomes import CHAT_MODEL

import x402lab as xl
from x402lab.errors import AnswerLost
from x402lab.money import format_usd
from x402lab.tables.spend import OUTCOMES


def test_budget_shows_spent_held_free_and_spend_agrees(start, lab_for):
    budget = xl.Budget(usd=1.0, name="shown")
    ok = lab_for(start(), budget=budget)
    ok.chat("Paid", model=CHAT_MODEL, max_tokens=8)
    lost = lab_for(
        start(paid_then_500_rate=1.0), chain=False, budget=xl.Budget(usd=1.0, name="shown")
    )
    with pytest.raises(AnswerLost):
        lost.chat("Lost", model=CHAT_MODEL, max_tokens=8)
    refused = lab_for(start(settle_fail_rate=1.0), budget=xl.Budget(usd=1.0, name="shown"))
    with pytest.raises(xl.PaymentRejected):
        refused.chat("Refused", model=CHAT_MODEL, max_tokens=8)

    figures = ok.budget.figures()
    state = ok.budget.state()
    assert figures["spent"] == state.settled_atomic > 0
    assert figures["held"] == state.unknown_atomic + state.held_atomic > 0
    assert figures["free"] == 1_000_000 - figures["spent"] - figures["held"]
    text = repr(ok.budget)
    for name in ("spent", "held", "free"):
        assert f"{name}={format_usd(figures[name])}" in text
    html = ok.budget._repr_html_()
    assert f"spent {format_usd(figures['spent'])}" in html and "free" in html

    [line] = ok.spend(by="budget", atomic=True).to_dict("records")
    assert line["settled_atomic"] == figures["spent"]
    assert line["committed_atomic"] - line["settled_atomic"] == figures["held"]
    pending = line["unknown_atomic"] + line["held_atomic"] + line["in_flight_atomic"]
    assert pending == figures["held"]


def test_the_cost_report_has_a_reconciliation_table(start, lab_for):
    emulator = start(paid_then_500_rate=1.0)
    lab = lab_for(emulator, chain=False)
    with pytest.raises(AnswerLost):
        lab.chat("Lost for the report", model=CHAT_MODEL, max_tokens=8)
    table = lab.cost_report(prices=False).tables["outcomes"]
    assert list(table.columns) == OUTCOMES.names
    [row] = table.to_dict("records")
    assert (row["status"], row["payments"], row["resent"], row["resends"]) == ("unknown", 1, 1, 1)
    assert pd.notna(row["first_expiry"])

    lab_for(emulator).reconcile()
    table = lab.cost_report(prices=False).tables["outcomes"]
    [row] = table.to_dict("records")
    assert (row["status"], row["resolved_by"]) == ("settled", "chain")
    assert "Payment outcomes and reconciliation" in lab.cost_report(prices=False)._repr_html_()
