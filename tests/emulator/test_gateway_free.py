"""Gateway free routes, discovery documents, the price list and versioning (docs/services.md)."""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest
from support.gateway import Gateway, error_of

MODEL_TYPES = ("text", "image", "video", "music", "tts", "asr", "embedding", "upscale", "inpaint")
ACCURACY_TAGS = {
    "estimate",
    "list_rate",
    "quote_required",
    "reference_only",
    "exact_via_server_quote",
    "exact_agent_charge",
    "configured_rate",
    "free",
}
PAID_PATHS = (
    "/api/v1/chat/completions",
    "/api/v1/responses",
    "/api/v1/embeddings",
    "/api/v1/image/generate",
    "/api/v1/images/generations",
    "/api/v1/image/edit",
    "/api/v1/image/multi-edit",
    "/api/v1/image/upscale",
    "/api/v1/image/background-remove",
    "/api/v1/audio/speech",
    "/api/v1/audio/transcriptions",
    "/api/v1/audio/voices",
    "/api/v1/video/transcriptions",
    "/api/v1/augment/search",
    "/api/v1/augment/scrape",
    "/api/v1/augment/text-parser",
    "/api/v1/crypto/rpc/{network}",
    "/api/v1/audio/queue",
    "/api/v1/video/queue",
)
FREE_JOB_PATHS = (
    "/api/v1/audio/quote",
    "/api/v1/audio/retrieve",
    "/api/v1/audio/complete",
    "/api/v1/video/quote",
    "/api/v1/video/retrieve",
    "/api/v1/video/complete",
)


@pytest.fixture
def client(emulator):
    with httpx.Client(base_url=emulator.gateway_url) as client:
        yield client


# -- catalogs ---------------------------------------------------------------------------------


def test_models_default_is_all_types_in_the_upstream_shape(client):
    body = client.get("/api/v1/models").json()
    assert body["object"] == "list" and body["type"] == "all"
    types = {m["type"] for m in body["data"]}
    assert types == set(MODEL_TYPES)
    for model in body["data"]:
        assert isinstance(model["id"], str) and model["id"]
        assert isinstance(model["model_spec"]["name"], str)
        # the emulator's private notes never leave the server
        assert not any(key.startswith("_") for key in model["model_spec"])


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_models_filter_by_each_allowed_type(client, model_type):
    body = client.get("/api/v1/models", params={"type": model_type}).json()
    assert body["type"] == model_type
    assert len(body["data"]) >= 1
    assert {m["type"] for m in body["data"]} == {model_type}


def test_models_with_type_all_equals_no_type(client):
    assert (
        client.get("/api/v1/models", params={"type": "all"}).json()["data"]
        == client.get("/api/v1/models").json()["data"]
    )


def test_models_unknown_type_is_400_with_hint(client):
    body = error_of(
        client.get("/api/v1/models", params={"type": "hologram"}), 400, "invalid_request"
    )
    assert "text" in body["hint"]


def test_catalog_has_a_thinking_text_model_and_a_cheap_fast_one(client):
    text = client.get("/api/v1/models", params={"type": "text"}).json()["data"]
    thinking = [m for m in text if m["model_spec"]["capabilities"]["supportsReasoning"]]
    assert thinking
    fast = [m for m in text if "fastest" in m["model_spec"]["traits"]]
    assert fast and fast[0]["model_spec"]["pricing"]["input"]["usd"] < 0.1


def test_video_models_list_constraints_and_prices(client):
    videos = client.get("/api/v1/models", params={"type": "video"}).json()["data"]
    priced = [m for m in videos if "pricing" in m["model_spec"]]
    assert len(priced) >= 2
    for model in priced:
        constraints = model["model_spec"]["constraints"]
        assert constraints["aspect_ratios"] and constraints["resolutions"]
        assert all(d.endswith("s") for d in constraints["durations"])
        assert set(model["model_spec"]["pricing"]["per_second"]) == set(constraints["resolutions"])


def test_every_video_model_carries_its_constraints(client):
    # The catalog shows model_spec.constraints (the allowed duration, aspect_ratio
    # and resolution values) for video models, priced or not.
    videos = client.get("/api/v1/models", params={"type": "video"}).json()["data"]
    assert len(videos) >= 4 and any("pricing" not in m["model_spec"] for m in videos)
    for model in videos:
        constraints = model["model_spec"].get("constraints")
        assert isinstance(constraints, dict), model["id"]
        for key in ("durations", "aspect_ratios", "resolutions"):
            values = constraints.get(key)
            assert isinstance(values, list) and values, (model["id"], key)
            assert all(isinstance(v, str) and v for v in values), (model["id"], key)
        assert all(d.endswith("s") and d[:-1].isdigit() for d in constraints["durations"])


def test_ace_step_durations_are_the_six_spec_values(client):
    music = client.get("/api/v1/models", params={"type": "music"}).json()["data"]
    ace = next(m for m in music if m["id"].startswith("ace-step"))
    tiers = ace["model_spec"]["pricing"]["durations"]
    assert sorted(int(k) for k in tiers) == [60, 90, 120, 150, 180, 210]
    assert all(t["min_seconds"] == t["max_seconds"] == int(k) for k, t in tiers.items())
    # and one music model is priced per character (tts-like)
    assert any("per_thousand_characters" in m["model_spec"]["pricing"] for m in music)


def test_traits_map_default_and_fastest_to_live_ids(client):
    body = client.get("/api/v1/models/traits").json()
    assert body["object"] == "list" and body["type"] == "text"
    ids = {m["id"] for m in client.get("/api/v1/models", params={"type": "text"}).json()["data"]}
    assert {"default", "fastest"} <= set(body["data"])
    assert set(body["data"].values()) <= ids


def test_traits_by_type_and_unknown_type(client):
    image = client.get("/api/v1/models/traits", params={"type": "image"}).json()
    assert image["type"] == "image" and "default" in image["data"]
    error_of(client.get("/api/v1/models/traits", params={"type": "all"}), 400, "invalid_request")


def test_characters_list_and_one_by_slug(client):
    data = client.get("/api/v1/characters").json()["data"]
    assert len(data) >= 3
    first = data[0]
    for key in ("slug", "name", "description", "modelId", "tags", "stats"):
        assert key in first
    one = client.get(f"/api/v1/characters/{first['slug']}").json()["data"]
    assert one == first


def test_unknown_character_is_404(client):
    body = error_of(client.get("/api/v1/characters/nobody-here"), 404, "not_found")
    assert "characters" in body["hint"]


def test_image_styles(client):
    body = client.get("/api/v1/image/styles").json()
    assert body["object"] == "list"
    assert "Cinematic" in body["data"] and all(isinstance(s, str) for s in body["data"])


def test_rpc_networks(client):
    networks = client.get("/api/v1/crypto/rpc/networks").json()["networks"]
    assert "base-mainnet" in networks and "ethereum-mainnet" in networks


def test_stats_are_real_counters(client, payer):
    before = client.get("/api/x402/stats").json()
    assert before["payments"]["settled"] == 0
    gw = Gateway(client, payer)
    body = {"query": "x402"}
    assert gw.pay("/api/v1/augment/search", json=body).status_code == 200
    after = client.get("/api/x402/stats").json()
    assert after["payments"]["challenges"] == before["payments"]["challenges"] + 1
    assert after["payments"]["settled"] == 1
    assert after["payments"]["settledAtomic"] == 10_000
    assert after["paidCallsByRoute"]["/api/v1/augment/search"] == {"calls": 1, "atomic": 10_000}


@pytest.mark.parametrize("path", ["/api/v1/audio/quote", "/api/v1/video/quote"])
def test_quote_routes_are_free(client, path):
    body = (
        {"model": "ace-step-15", "duration_seconds": 60}
        if "audio" in path
        else {"model": "wan-2-7-text-to-video", "duration": "5s"}
    )
    response = client.post(path, json=body)
    assert response.status_code == 200
    assert "payment-required" not in response.headers


def test_unknown_path_and_method_are_json_errors(client):
    error_of(client.get("/api/v1/nope"), 404, "not_found")
    error_of(client.get("/api/v1/chat/completions"), 405, "method_not_allowed")


# -- discovery documents ---------------------------------------------------------------------


def test_openapi_is_3_1_with_info_version_and_guidance(client):
    doc = client.get("/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    assert isinstance(doc["info"]["x-guidance"], str) and "402" in doc["info"]["x-guidance"]


def test_openapi_has_a_path_entry_per_route(client):
    paths = client.get("/openapi.json").json()["paths"]
    free = (
        "/openapi.json",
        "/llms.txt",
        "/.well-known/x402.json",
        "/api/v1/models",
        "/api/v1/models/traits",
        "/api/v1/characters",
        "/api/v1/characters/{slug}",
        "/api/v1/image/styles",
        "/api/v1/crypto/rpc/networks",
        "/api/x402/stats",
    )
    for path in free:
        assert "get" in paths[path], path
    for path in (*PAID_PATHS, *FREE_JOB_PATHS):
        operation = paths[path]["post"]
        assert "requestBody" in operation, path
    for path in PAID_PATHS:
        responses = paths[path]["post"]["responses"]
        assert "402" in responses and "400" in responses, path
        assert paths[path]["post"]["x-payment-info"]["accuracy"] in ACCURACY_TAGS


def test_openapi_request_schemas_list_live_model_ids(client):
    doc = client.get("/openapi.json").json()
    schema = doc["paths"]["/api/v1/chat/completions"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]
    assert schema["required"] == ["model", "messages"]
    text_ids = {
        m["id"]
        for m in client.get("/api/v1/models", params={"type": "text"}).json()["data"]
        if "pricing" in m["model_spec"]
    }
    assert set(schema["properties"]["model"]["enum"]) == text_ids
    voices = doc["paths"]["/api/v1/audio/voices"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in voices


def test_price_list_has_every_field_of_spec_2_2(client):
    pricing = client.get("/openapi.json").json()["info"]["x-pricing"]
    assert pricing["currency"] == "USD"
    assert pricing["priceMult"] == 0.5
    assert pricing["minChargeUsd"] == 0.01
    assert pricing["maxChargeUsd"] == 50
    datetime.fromisoformat(pricing["generatedAt"].replace("Z", "+00:00"))
    assert "402" in pricing["authoritative"]
    assert set(pricing["caveats"]) == {"estimates", "list_rates", "quote_required", "free_steps"}
    assert set(pricing["howToGetAccurateEstimates"]) == {"chat", "image", "music", "video", "probe"}
    assert all(isinstance(v, str) and v for v in pricing["caveats"].values())
    assert "text" in pricing["models"]


def test_price_list_routes_carry_accuracy_tags(client):
    routes = client.get("/openapi.json").json()["info"]["x-pricing"]["routes"]
    for path in (*PAID_PATHS, *FREE_JOB_PATHS):
        entry = routes[path]
        assert entry["accuracy"] in ACCURACY_TAGS, path
        if entry["accuracy"] == "configured_rate":
            assert isinstance(entry["agentUsd"], float)
        else:
            assert isinstance(entry["howAccurate"], str) and entry["howAccurate"]
    for path in ("/api/v1/augment/search", "/api/v1/augment/scrape", "/api/v1/augment/text-parser"):
        # configured 0.005 USD upstream x 0.5, then the 0.01 minimum
        assert routes[path] == {**routes[path], "accuracy": "configured_rate", "agentUsd": 0.01}
    assert {routes[p]["accuracy"] for p in FREE_JOB_PATHS} == {"free"}


def test_model_price_entries(client):
    models = client.get("/openapi.json").json()["info"]["x-pricing"]["models"]
    entries = [e for family in models.values() for e in family]
    ids = {m["id"] for m in client.get("/api/v1/models").json()["data"]}
    for entry in entries:
        assert set(entry) == {"id", "name", "accuracy", "unit", "venice", "agent", "note"}
        assert entry["id"] in ids
        assert entry["accuracy"] in ACCURACY_TAGS
        assert {"inputUsdPer1M", "outputUsdPer1M"} <= set(entry["venice"])
        assert {"inputUsdPer1M", "outputUsdPer1M"} <= set(entry["agent"])
    glm = next(e for e in models["text"] if e["id"] == "zai-org-glm-5-2")
    assert glm["unit"] == "usd_per_1m_tokens"
    assert glm["venice"]["inputUsdPer1M"] == 1.4 and glm["venice"]["outputUsdPer1M"] == 4.4
    assert glm["agent"]["inputUsdPer1M"] == 0.7 and glm["agent"]["outputUsdPer1M"] == 2.2
    # an unpriced model is not on the price list
    assert "hermes-uncensored-preview" not in {e["id"] for e in entries}


def test_price_list_follows_the_operator_multiplier(emulator_factory):
    emulator = emulator_factory(price_mult=2.0, max_charge_usd=20.0)
    pricing = httpx.get(f"{emulator.gateway_url}/openapi.json").json()["info"]["x-pricing"]
    assert pricing["priceMult"] == 2.0 and pricing["maxChargeUsd"] == 20.0
    glm = next(e for e in pricing["models"]["text"] if e["id"] == "zai-org-glm-5-2")
    assert glm["agent"]["inputUsdPer1M"] == 2.8
    assert pricing["routes"]["/api/v1/augment/search"]["agentUsd"] == 0.01  # 0.005 x 2


def test_llms_txt(client):
    response = client.get("/llms.txt")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "/openapi.json" in text and "PAYMENT-SIGNATURE" in text
    for path in PAID_PATHS:
        assert path in text


def test_well_known_x402(client, emulator):
    doc = client.get("/.well-known/x402.json").json()
    assert doc["x402Version"] == 2
    assert doc["openapi"] == f"{emulator.gateway_url}/openapi.json"
    assert doc["accepts"][0]["network"] == "eip155:8453"
    assert doc["pricing"]["priceMult"] == 0.5
    urls = {r["url"] for r in doc["resources"]}
    assert f"{emulator.gateway_url}/api/v1/chat/completions" in urls


def test_routes_live_under_api_v1(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path in paths:
        assert path.startswith("/api/") or path in (
            "/openapi.json",
            "/llms.txt",
            "/.well-known/x402.json",
        )


def test_openapi_is_valid_and_its_examples_match_their_schemas(client):
    # Judged by the reference implementations (openapi-spec-validator, jsonschema), not by
    # the jsonschema_rs the emulator validates with: the document is for every client.
    import jsonschema
    import openapi_spec_validator as validator

    doc = client.get("/openapi.json").json()
    validator.validate(doc)
    examples = 0
    for operations in doc["paths"].values():
        for operation in operations.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                jsonschema.Draft202012Validator.check_schema(media["schema"])
                if "example" in media:
                    jsonschema.Draft202012Validator(media["schema"]).validate(media["example"])
                    examples += 1
    assert examples >= 15


def test_bazaar_schema_validates_its_own_info(client):
    import jsonschema

    body = {"model": "zai-org-glm-4.7-flash", "messages": [{"role": "user", "content": "hi"}]}
    response = client.post("/api/v1/chat/completions", json=body)
    bazaar = response.json()["extensions"]["bazaar"]
    jsonschema.Draft202012Validator(bazaar["schema"]).validate(bazaar["info"])
