"""The report service row by row: routes, rules, authentication and errors (docs/services.md)."""

from __future__ import annotations

import httpx
import pytest

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.tokens import BASE_USDC

REPORTS = "/api/intel/reports"


@pytest.fixture
def client(emulator):
    with httpx.Client(base_url=emulator.reports_url) as client:
        yield client


def _menu(client, username="bytebarista"):
    response = client.get(REPORTS, params={"username": username})
    assert response.status_code == 200, response.text
    return response.json()


def _error(response, status, code):
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code
    assert isinstance(body["message"], str) and body["message"]
    return body


# -- GET /api/intel/list ---------------------------------------------------------------------


def test_list_is_free_and_sorted_newest_first_by_gathered_at(client):
    response = client.get("/api/intel/list")
    assert response.status_code == 200
    body = response.json()
    assert body["configured"] is True
    entries = body["entries"]
    assert 4 <= len(entries) <= 5
    stamps = [entry["gatheredAt"] for entry in entries]
    assert stamps == sorted(stamps, reverse=True)
    for entry in entries:
        assert isinstance(entry["username"], str)
        assert isinstance(entry["displayName"], str)
        assert 3 <= entry["reportCount"] <= 8
        assert isinstance(entry["postCount"], int)
        assert entry["gatheredAt"].endswith("Z")
        assert entry["avatarUrl"].startswith("https://")
        assert isinstance(entry["followers"], int)


def test_list_without_a_store_is_configured_false_and_empty(emulator_factory):
    emulator = emulator_factory(kv_configured=False)
    body = httpx.get(f"{emulator.reports_url}/api/intel/list").json()
    assert body == {"configured": False, "entries": []}


@pytest.mark.parametrize("path", ["/api/intel/list", REPORTS])
def test_endpoints_accept_get_only(client, path):
    response = client.post(path)
    _error(response, 405, "method_not_allowed")
    assert "GET" in response.headers["allow"]


# -- the free menu -----------------------------------------------------------------------------


def test_menu_is_free_metadata_newest_first(client):
    shelf = {e["username"]: e for e in client.get("/api/intel/list").json()["entries"]}
    for username, entry in shelf.items():
        menu = _menu(client, username)
        assert set(menu) == {"username", "reportCount", "reports"}
        assert menu["username"] == username
        assert menu["reportCount"] == entry["reportCount"] == len(menu["reports"])
        created = [item["createdAt"] for item in menu["reports"]]
        assert created == sorted(created, reverse=True)
        for item in menu["reports"]:
            assert set(item) == {"id", "createdAt", "model", "postCount", "dateRange"}
            assert set(item["dateRange"]) == {"from", "to"}
            assert item["dateRange"]["from"] <= item["dateRange"]["to"] <= item["createdAt"]


def test_menu_accepts_an_at_sign_and_any_case(client):
    assert _menu(client, "@ByteBarista") == _menu(client, "bytebarista")


# -- select=all, its price and its 402 body ------------------------------------------------------


def test_select_all_without_payment_is_the_24_challenge(client, helpers):
    count = _menu(client)["reportCount"]
    response = client.get(REPORTS, params={"username": "bytebarista", "select": "all"})
    assert response.status_code == 402
    body = response.json()
    assert body["x402Version"] == 2
    assert isinstance(body["error"], str)
    assert body["accepts"] == [
        {
            "protocol": "x402",
            "version": 2,
            "network": "eip155:8453",
            "asset": BASE_USDC.address,
            "amount": str(10_000 * count),
            "payTo": RECEIVER_ADDRESS,
        }
    ]
    assert body["extensions"] == {
        "chainId": 8453,
        "tokenDecimals": 6,
        "unitPriceUsd": 0.01,
        "reportCount": count,
        "select": "all",
        "resource": f"{REPORTS}?username=bytebarista&select=all",
    }
    # The header carries the standard v2 challenge, so any x402 client can pay it.
    standard = helpers.challenge_of(response)
    [entry] = standard["accepts"]
    assert entry["scheme"] == "exact"
    assert entry["maxTimeoutSeconds"] == 300
    assert entry["extra"] == {"name": "USD Coin", "version": "2"}
    assert entry["amount"] == str(10_000 * count)
    assert standard["extensions"] == body["extensions"]
    assert response.headers["cache-control"] == "no-store"


def _buy(client, payer, helpers, params, header="X-402-Payment", **sign):
    unpaid = client.get(REPORTS, params=params)
    paid = client.get(
        REPORTS, params=params, headers={header: payer.header(helpers.challenge_of(unpaid), **sign)}
    )
    return paid


def test_select_all_after_payment_returns_every_report(client, emulator, payer, helpers):
    menu = _menu(client)
    params = {"username": "bytebarista", "select": "all"}
    response = _buy(client, payer, helpers, params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"username", "select", "reportCount", "chargedUsd", "reports"}
    assert body["username"] == "bytebarista"
    assert body["select"] == "all"
    assert body["reportCount"] == menu["reportCount"] == len(body["reports"])
    assert body["chargedUsd"] == pytest.approx(0.01 * menu["reportCount"])
    assert [r["id"] for r in body["reports"]] == [r["id"] for r in menu["reports"]]
    receipt = helpers.receipt_of(response)
    assert receipt["success"] is True
    assert emulator.chain.received(RECEIVER_ADDRESS) == 10_000 * menu["reportCount"]


def test_snapshots_carry_narrative_analytics_and_nested_objects(client, payer, helpers):
    response = _buy(client, payer, helpers, {"username": "ledgerlark", "select": "all"})
    for report in response.json()["reports"]:
        assert {"id", "username", "createdAt", "model", "postCount", "dateRange"} <= set(report)
        narrative = report["narrative"]
        assert narrative["summary"] and narrative["themes"]
        assert all({"title", "description"} <= set(theme) for theme in narrative["themes"])
        analytics = report["analytics"]
        sentiment = analytics["sentiment"]
        assert sum(sentiment["distribution"].values()) == pytest.approx(1.0, abs=1e-6)
        assert sum(t["share"] for t in analytics["topics"]) == pytest.approx(1.0, abs=1e-6)
        assert analytics["engagement"]["totalLikes"] >= 0
        assert sum(analytics["activity"]["byWeekday"].values()) == report["postCount"]


@pytest.mark.parametrize("header", ["X-402-Payment", "X-Payment", "PAYMENT-SIGNATURE"])
def test_every_payment_header_is_accepted(client, payer, helpers, header):
    params = {"username": "solarmoth", "select": "all"}
    assert _buy(client, payer, helpers, params, header=header).status_code == 200


def test_price_is_unit_price_times_reports(emulator_factory, helpers):
    emulator = emulator_factory(report_usd=0.25)
    params = {"username": "quantquill", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        count = _menu(client, "quantquill")["reportCount"]
        body = client.get(REPORTS, params=params).json()
    assert body["accepts"][0]["amount"] == str(250_000 * count)
    assert body["extensions"]["unitPriceUsd"] == 0.25


def test_a_client_can_pay_from_the_body_alone(client, emulator, payer):
    params = {"username": "solarmoth", "select": "all"}
    body = client.get(REPORTS, params=params).json()
    response = client.get(REPORTS, params=params, headers={"X-Payment": payer.header(body)})
    assert response.status_code == 200, response.text
    assert emulator.chain.received(RECEIVER_ADDRESS) == int(body["accepts"][0]["amount"])


def test_overpayment_is_accepted_and_not_reflected(client, emulator, payer, helpers):
    params = {"username": "solarmoth", "select": "all"}
    challenge = helpers.challenge_of(client.get(REPORTS, params=params))
    price = int(challenge["accepts"][0]["amount"])
    header = payer.header(challenge, changes={"amount": str(price * 2)})
    response = client.get(REPORTS, params=params, headers={"X-Payment": header})
    assert response.status_code == 200, response.text
    assert response.json()["chargedUsd"] == pytest.approx(price / 1e6)
    assert emulator.chain.received(RECEIVER_ADDRESS) == price * 2


# -- select=range --------------------------------------------------------------------------------


def test_range_by_ids(client, payer, helpers):
    menu = _menu(client)["reports"]
    ids = [menu[1]["id"], menu[3]["id"]]
    params = {"username": "bytebarista", "select": "range", "ids": ",".join(ids)}
    assert helpers.challenge_of(client.get(REPORTS, params=params))["accepts"][0]["amount"] == (
        "20000"
    )
    body = _buy(client, payer, helpers, params).json()
    assert body["select"] == "range"
    assert body["reportCount"] == 2
    assert body["chargedUsd"] == pytest.approx(0.02)
    assert [r["id"] for r in body["reports"]] == ids


def test_range_from_and_to_are_inclusive_string_bounds_combined_with_and(client, payer, helpers):
    menu = _menu(client)["reports"]
    since, until = menu[4]["createdAt"], menu[1]["createdAt"]
    params = {"username": "bytebarista", "select": "range", "from": since, "to": until}
    body = _buy(client, payer, helpers, params).json()
    assert [r["id"] for r in body["reports"]] == [r["id"] for r in menu[1:5]]
    only_from = {"username": "bytebarista", "select": "range", "from": menu[2]["createdAt"]}
    assert client.get(REPORTS, params=only_from).json()["extensions"]["reportCount"] == 3
    only_to = {"username": "bytebarista", "select": "range", "to": menu[-2]["createdAt"]}
    assert client.get(REPORTS, params=only_to).json()["extensions"]["reportCount"] == 2


def test_range_ids_and_dates_combine_with_and(client):
    menu = _menu(client)["reports"]
    params = {
        "username": "bytebarista",
        "select": "range",
        "ids": f"{menu[0]['id']},{menu[5]['id']}",
        "from": menu[2]["createdAt"],
    }
    body = client.get(REPORTS, params=params).json()
    assert body["extensions"]["reportCount"] == 1


def test_range_date_only_bounds_compare_as_strings(client):
    menu = _menu(client)["reports"]
    day = menu[0]["createdAt"][:10]
    # "2025-04-14" <= "2025-04-14T..." but "2025-04-14T..." > "2025-04-14": inclusive as strings.
    with_from = {"username": "bytebarista", "select": "range", "from": day}
    assert client.get(REPORTS, params=with_from).json()["extensions"]["reportCount"] == 1
    with_to = {"username": "bytebarista", "select": "range", "to": day, "ids": menu[0]["id"]}
    _error(client.get(REPORTS, params=with_to), 404, "no_matching_reports")


# -- authentication --------------------------------------------------------------------------------


def test_library_secret_gets_bodies_without_charge(emulator_factory):
    emulator = emulator_factory(library_secret="s3cret")
    params = {"username": "quantquill", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        free = client.get(REPORTS, params=params, headers={"Authorization": "Bearer s3cret"})
        wrong = client.get(REPORTS, params=params, headers={"Authorization": "Bearer nope"})
    assert free.status_code == 200
    assert free.json()["reportCount"] == len(free.json()["reports"])
    assert free.json()["chargedUsd"] == 0
    assert "payment-response" not in free.headers
    assert wrong.status_code == 402
    assert emulator.chain.transfers() == []


def test_test_wallet_mode_refuses_other_payers_with_a_4xx(
    emulator_factory, payer, other_payer, helpers
):
    emulator = emulator_factory(test_wallet=payer.address)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        refused = _buy(client, other_payer, helpers, params)
        assert refused.status_code == 402
        assert refused.json()["error"] == "test_wallet_mismatch"
        assert _buy(client, payer, helpers, params).status_code == 200


# -- errors --------------------------------------------------------------------------------------


def test_range_without_ids_from_or_to_is_400(client):
    params = {"username": "bytebarista", "select": "range"}
    _error(client.get(REPORTS, params=params), 400, "range_requires_from_to_or_ids")
    params["ids"] = " , "
    _error(client.get(REPORTS, params=params), 400, "range_requires_from_to_or_ids")


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"username": ""},
        {"username": "bytebarista", "select": "some"},
        {"username": "bytebarista", "select": ""},
        {"username": "bytebarista", "select": "range", "from": "yesterday"},
        {"username": "bytebarista", "select": "range", "to": "2025-13-40"},
        {"username": "bytebarista", "select": "all", "ids": "rpt_1"},
        {"username": "bytebarista", "from": "2025-01-01"},
        [("username", "bytebarista"), ("username", "quantquill")],
    ],
)
def test_malformed_query_is_400(client, params):
    _error(client.get(REPORTS, params=params), 400, "invalid_query")


def test_unknown_handle_is_404(client):
    _error(client.get(REPORTS, params={"username": "nobody_here"}), 404, "unknown_handle")
    params = {"username": "nobody_here", "select": "all"}
    _error(client.get(REPORTS, params=params), 404, "unknown_handle")


def test_range_matching_nothing_is_404(client):
    params = {"username": "bytebarista", "select": "range", "ids": "rpt_missing"}
    _error(client.get(REPORTS, params=params), 404, "no_matching_reports")
    params = {"username": "bytebarista", "select": "range", "from": "2100-01-01"}
    _error(client.get(REPORTS, params=params), 404, "no_matching_reports")


def test_payment_below_the_price_is_insufficient_payment(client, emulator, payer, helpers):
    menu = _menu(client)["reports"]
    one = {"username": "bytebarista", "select": "range", "ids": menu[0]["id"]}
    header = payer.header(helpers.challenge_of(client.get(REPORTS, params=one)))
    everything = {"username": "bytebarista", "select": "all"}
    response = client.get(REPORTS, params=everything, headers={"X-402-Payment": header})
    body = _error(response, 402, "insufficient_payment")
    assert body["accepts"][0]["amount"] == str(10_000 * len(menu))
    assert helpers.challenge_of(response)["error"] == "insufficient_payment"
    assert emulator.chain.transfers() == []
    # Nothing was used up: the same payment still buys what it was signed for.
    assert client.get(REPORTS, params=one, headers={"X-Payment": header}).status_code == 200


def test_reused_payment_id_is_409(client, emulator, payer, helpers):
    params = {"username": "solarmoth", "select": "all"}
    challenge = helpers.challenge_of(client.get(REPORTS, params=params))
    header = payer.header(challenge)
    assert client.get(REPORTS, params=params, headers={"X-Payment": header}).status_code == 200
    again = client.get(REPORTS, params=params, headers={"X-402-Payment": header})
    _error(again, 409, "payment_already_used")
    assert len(emulator.chain.transfers()) == 1


def test_settlement_not_configured_is_501(emulator_factory):
    emulator = emulator_factory(settlement_configured=False, library_secret="lib")
    params = {"username": "quantquill", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        _error(client.get(REPORTS, params=params), 501, "settlement_not_configured")
        assert client.get(REPORTS, params={"username": "quantquill"}).status_code == 200
        first_party = {"Authorization": "Bearer lib"}
        assert client.get(REPORTS, params=params, headers=first_party).status_code == 200


@pytest.mark.parametrize("kind", ["forged", "expired", "malformed"])
def test_refused_payments_are_4xx_and_settle_nothing(
    client, emulator, payer, other_payer, helpers, kind
):
    params = {"username": "solarmoth", "select": "all"}
    challenge = helpers.challenge_of(client.get(REPORTS, params=params))
    if kind == "forged":
        from x402lab.x402.codec import encode_header

        wire = other_payer.sign(challenge).to_wire()
        wire["payload"]["authorization"]["from"] = payer.address
        header = encode_header(wire)
    elif kind == "expired":
        header = payer.header(challenge, now=0)
    else:
        header = "definitely-not-a-payment"
    response = client.get(REPORTS, params=params, headers={"X-Payment": header})
    assert 400 <= response.status_code < 500
    assert response.json()["error"]
    assert emulator.chain.transfers() == []


def test_library_is_identical_across_emulators_and_seeds(emulator_factory, payer, helpers):
    bodies = []
    for seed in (0, 99):
        emulator = emulator_factory(seed=seed, library_secret="k")
        with httpx.Client(base_url=emulator.reports_url) as client:
            shelf = client.get("/api/intel/list").json()
            reports = client.get(
                REPORTS,
                params={"username": "orbitalfinch", "select": "all"},
                headers={"Authorization": "Bearer k"},
            ).json()
        bodies.append((shelf, reports))
    assert bodies[0] == bodies[1]
