"""The report service keeps an overpayment (docs/services.md, "Buying reports"), so it is paid
up front only with a 402 of the *same* selection still inside its window: the price check the buy
makes anyway (a quote of that exact request) pays with the buy's first request. It is never
predicted by price class, and a quote older than its window is not used."""

from __future__ import annotations

from support.prepay import check_money, report_gate

from x402lab.payments import CallInfo
from x402lab.payments.prediction import QUOTE_TTL_S, Prediction, fingerprint
from x402lab.routes import GATEWAY, REPORTS
from x402lab.x402.models import normalize_challenge
from x402lab.x402.tokens import BASE_USDC

HANDLE = "quantquill"


def test_a_report_purchase_pays_with_the_quote_of_its_own_selection(start, lab_on):
    emulator = start()
    lab = lab_on(emulator)
    bought = lab.reports.buy(HANDLE, select="all")
    counters = report_gate(emulator)
    # The price check (402) and the paid request: two, not three (probe, 402, paid).
    assert (counters["requests"], counters["challenges"], counters["settled"]) == (2, 1, 1)
    [row] = check_money(lab, emulator.chain)
    assert row["prepaid"] and row["status"] == "settled" and row["service"] == REPORTS
    [transfer] = emulator.chain.transfers()
    assert transfer.amount_atomic == row["amount_atomic"] == bought.paid_atomic
    assert bought.charged_usd == bought.paid_atomic / 1e6  # the price, not more
    # Bought: a second buy sends nothing paid.
    lab.reports.buy(HANDLE, select="all")
    assert report_gate(emulator)["requests"] == 2


def test_without_prepay_a_report_purchase_takes_three_requests(start, lab_on):
    emulator = start()
    lab = lab_on(emulator, prepay=False)
    lab.reports.buy(HANDLE, select="all")
    assert report_gate(emulator)["requests"] == 3
    [row] = check_money(lab, emulator.chain)
    assert not row["prepaid"]


def _challenge(amount: int) -> object:
    entry = {
        "scheme": "exact",
        "network": BASE_USDC.network,
        "asset": BASE_USDC.address,
        "amount": str(amount),
        "payTo": "0xf4C9A2DcAa9B9DD3Da5ffFB061B2d01246251973",
        "maxTimeoutSeconds": 300,
        "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
    }
    return normalize_challenge({"x402Version": 2, "accepts": [entry], "extensions": {}})


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def test_reports_are_never_predicted_by_price_class():
    prediction = Prediction(now=Clock())
    key = (REPORTS, "GET", "/api/intel/reports", "", "fixed", "0.01")
    call = CallInfo(REPORTS, "GET", "/api/intel/reports", price_class=key)
    for _ in range(3):
        prediction.observe(call, _challenge(30_000))
    assert prediction.predict(call, lambda: None) is None
    # The same evidence predicts a gateway class.
    gateway = CallInfo(GATEWAY, "POST", "/api/v1/augment/search", price_class=("g",))
    prediction.observe(gateway, _challenge(10_000))
    assert prediction.predict(gateway, lambda: None) is None  # one 402 is not evidence
    prediction.observe(gateway, _challenge(10_000))
    found = prediction.predict(gateway, lambda: None)
    assert found is not None and found.challenge.accepts[0].amount == 10_000
    # Another price breaks the run: evidence starts again.
    prediction.observe(gateway, _challenge(12_000))
    assert prediction.predict(gateway, lambda: None) is None


def test_a_quote_is_used_once_and_only_inside_its_window():
    clock = Clock()
    prediction = Prediction(now=clock)
    call = CallInfo(REPORTS, "GET", "/api/intel/reports")
    same = fingerprint("GET", "http://127.0.0.1:1/api/intel/reports?select=all", b"")
    other = fingerprint("GET", "http://127.0.0.1:1/api/intel/reports?select=range", b"")
    prediction.remember_quote(same, _challenge(30_000))
    assert prediction.predict(call, lambda: other) is None  # another selection
    found = prediction.predict(call, lambda: same)
    assert found is not None and found.source == "quote"
    assert prediction.predict(call, lambda: same) is None  # used once
    prediction.remember_quote(same, _challenge(30_000))
    clock.t += min(QUOTE_TTL_S, 300) + 1
    assert prediction.predict(call, lambda: same) is None  # past its window
    off = Prediction(enabled=False, now=clock)
    off.remember_quote(same, _challenge(30_000))
    assert off.predict(call, lambda: same) is None
