"""The report service under arbitrary queries and payment headers, and under faults."""

from __future__ import annotations

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.codec import encode_header

REPORTS = "/api/intel/reports"
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_VALUES = st.one_of(
    _TEXT,
    st.sampled_from(["all", "range", "bytebarista", "2025-03-01", "2025-03-01T00:00:00Z", ","]),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_PAYLOAD_KEYS = st.sampled_from(["x402Version", "accepted", "payload", "authorization", "from"])
_HEADERS = st.one_of(
    st.none(),
    # Printable ASCII without surrounding blanks: what HTTP lets a header value be.
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.strip),
    st.dictionaries(st.one_of(_PAYLOAD_KEYS, _TEXT), _JSON, max_size=5).map(encode_header),
)
_QUERIES = st.lists(
    st.tuples(st.sampled_from(["username", "select", "ids", "from", "to", "other"]), _VALUES),
    max_size=6,
)

_PAID_SELECT = st.just([("username", "solarmoth"), ("select", "all")])


def test_no_query_or_header_gives_a_5xx(emulator):
    with httpx.Client(base_url=emulator.reports_url) as client:

        @settings(
            max_examples=200,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(query=st.one_of(_QUERIES, _PAID_SELECT), header=_HEADERS)
        def check(query: list[tuple[str, str]], header: str | None) -> None:
            headers = {"X-402-Payment": header} if header is not None else {}
            response = client.get(REPORTS, params=query, headers=headers)
            assert response.status_code in {200, 400, 402, 404}, response.text
            body = response.json()
            if response.status_code >= 400:
                assert isinstance(body["error"], str)

        check()
    assert emulator.chain.transfers() == []


def _pay(client, payer, helpers, params):
    challenge = helpers.challenge_of(client.get(REPORTS, params=params))
    header = payer.header(challenge)
    return header, client.get(REPORTS, params=params, headers={"X-402-Payment": header})


def test_settle_failure_on_reports_is_402_with_a_failed_receipt(emulator_factory, payer, helpers):
    emulator = emulator_factory(settle_fail_rate=1.0)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        _, response = _pay(client, payer, helpers, params)
    assert response.status_code == 402
    assert helpers.receipt_of(response)["success"] is False
    assert response.json()["accepts"][0]["protocol"] == "x402"
    assert emulator.chain.transfers() == []


def test_paid_then_500_on_reports_settles_and_the_payment_id_is_spent(
    emulator_factory, payer, helpers
):
    emulator = emulator_factory(paid_then_500_rate=1.0)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        header, response = _pay(client, payer, helpers, params)
        assert response.status_code == 500
        assert "payment-response" not in response.headers
        price = emulator.chain.received(RECEIVER_ADDRESS)
        assert price > 0
        again = client.get(REPORTS, params=params, headers={"X-402-Payment": header})
    assert again.status_code == 409
    assert emulator.chain.received(RECEIVER_ADDRESS) == price


def test_rate_limit_and_outage_faults_spare_the_free_routes(emulator_factory):
    for faults, status in (({"rate_429": 1.0}, 429), ({"rate_5xx": 1.0}, 503)):
        emulator = emulator_factory(**faults)
        with httpx.Client(base_url=emulator.reports_url) as client:
            assert client.get("/api/intel/list").status_code == 200
            assert client.get(REPORTS, params={"username": "solarmoth"}).status_code == 200
            paid = client.get(REPORTS, params={"username": "solarmoth", "select": "all"})
            assert paid.status_code == status
