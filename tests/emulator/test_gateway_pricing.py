"""Gateway prices, exact in atomic units (docs/services.md, "Price rule").

Default settings: priceMult 0.5, minimum 0.01 USD (10000 atomic), maximum 50 USD.
"""

from __future__ import annotations

import httpx
import pytest
from support.gateway import Gateway, error_of

CHAT = "/api/v1/chat/completions"
PRO = "openai-gpt-54-pro"  # 37.5 USD in / 225 USD out per 1M tokens
PROMPT_400 = "x" * 400  # 100 estimated tokens, +4 per message = 104


@pytest.fixture
def gw(emulator, payer):
    with httpx.Client(base_url=emulator.gateway_url) as client:
        yield Gateway(client, payer)


@pytest.fixture
def start(emulator_factory, payer):
    clients: list[httpx.Client] = []

    def start_gateway(settings=None, **changes) -> Gateway:
        emulator = emulator_factory(settings, **changes)
        client = httpx.Client(base_url=emulator.gateway_url)
        clients.append(client)
        return Gateway(client, payer)

    yield start_gateway
    for client in clients:
        client.close()


def _chat(model=PRO, content=PROMPT_400, **extra):
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


# -- rule 1 and rule 2: chat ------------------------------------------------------------------


def test_chat_estimate_from_input_size_and_max_tokens(gw):
    challenge = gw.challenge(CHAT, json=_chat(max_tokens=1000))
    # (104 x 37.5 + 1000 x 225) / 1e6 = 0.2289 USD upstream; x 0.5 = 0.11445 USD
    assert challenge["accepts"][0]["amount"] == "114450"
    assert challenge["extensions"]["upstreamUsd"] == pytest.approx(0.2289, abs=1e-12)
    assert challenge["extensions"]["priceMult"] == 0.5


def test_max_tokens_tightens_the_estimate(gw):
    # without max_tokens the output estimate is 4096 tokens: (3900 + 921600) / 1e6 x 0.5
    assert gw.amount(CHAT, json=_chat()) == 462750
    assert gw.amount(CHAT, json=_chat(max_tokens=1000)) == 114450
    assert gw.amount(CHAT, json=_chat(max_tokens=10)) < 114450


def test_max_completion_tokens_wins_over_max_tokens(gw):
    both = _chat(max_tokens=10, max_completion_tokens=1000)
    assert gw.amount(CHAT, json=both) == 114450


def test_non_text_parts_count_a_fixed_token_estimate(gw):
    parts = [
        {"type": "text", "text": "y" * 40},
        {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
    ]
    body = {"model": PRO, "messages": [{"role": "user", "content": parts}], "max_tokens": 1000}
    # input: 10 + 256 + 4 = 270 tokens -> (270 x 37.5 + 225000) / 1e6 x 0.5
    assert gw.amount(CHAT, json=body) == 117562  # 0.11756250 USD, half-even at 6 decimals


def test_minimum_charge_applies_to_cheap_calls(gw):
    body = _chat(model="zai-org-glm-4.7-flash", content="hi", max_tokens=5)
    challenge = gw.challenge(CHAT, json=body)
    assert challenge["accepts"][0]["amount"] == "10000"
    assert challenge["extensions"]["upstreamUsd"] < 0.0001


def test_minimum_charge_is_the_operator_setting(start):
    gw = start(min_charge_usd=0.05)
    assert gw.amount(CHAT, json=_chat(model="zai-org-glm-4.7-flash", max_tokens=5)) == 50_000


def test_above_the_maximum_fails_closed_with_charge_exceeds_max(gw):
    # 500000 x 225 / 1e6 = 112.5 USD upstream, 56.25 USD agent > 50 USD
    response = gw.post(CHAT, json=_chat(max_tokens=500_000))
    body = error_of(response, 400, "charge_exceeds_max")
    assert "payment-required" not in response.headers
    assert body["maxChargeUsd"] == 50 and body["chargeUsd"] > 50
    assert body["hint"]


def test_maximum_is_the_operator_setting(start):
    gw = start(max_charge_usd=0.1)
    error_of(gw.post(CHAT, json=_chat(max_tokens=1000)), 400, "charge_exceeds_max")
    assert gw.amount(CHAT, json=_chat(max_tokens=100)) <= 100_000


# -- rule 7: the multiplier -------------------------------------------------------------------


def test_operator_variables_set_the_multiplier_and_the_cap(start):
    from x402lab.emulator.settings import EmulatorSettings

    settings = EmulatorSettings.from_env(
        {"X402_PROVIDER_PRICE_MULT": "2", "X402_PROVIDER_MAX_CHARGE_USD": "0.3"}
    )
    gw = start(settings=settings)
    challenge = gw.challenge(CHAT, json=_chat(max_tokens=100))
    # (104 x 37.5 + 100 x 225) / 1e6 = 0.0264 USD upstream, x 2
    assert challenge["accepts"][0]["amount"] == "52800"
    assert challenge["extensions"]["priceMult"] == 2.0
    error_of(gw.post(CHAT, json=_chat(max_tokens=1000)), 400, "charge_exceeds_max")


@pytest.mark.parametrize(("mult", "amount"), [(0.5, 114450), (1.0, 228900), (2.0, 457800)])
def test_price_mult_changes_every_challenge(start, mult, amount):
    gw = start(price_mult=mult)
    challenge = gw.challenge(CHAT, json=_chat(max_tokens=1000))
    assert challenge["accepts"][0]["amount"] == str(amount)
    assert challenge["extensions"]["priceMult"] == mult
    assert challenge["extensions"]["upstreamUsd"] == pytest.approx(0.2289, abs=1e-12)


def test_price_mult_changes_music_quotes_and_queues(start):
    gw = start(price_mult=3.0)
    quote = gw.post("/api/v1/audio/quote", json={"model": "ace-step-15", "duration_seconds": 210})
    assert quote.json() == {"quote": 0.24, "upstreamUsd": 0.08}
    body = {"model": "ace-step-15", "prompt": "lofi", "duration_seconds": 210}
    assert gw.amount("/api/v1/audio/queue", json=body) == 240_000


# -- rule 3: image, edit, upscale -------------------------------------------------------------


def test_image_list_price_times_n(gw):
    body = {"model": "flux-2-pro", "prompt": "a fox", "n": 3}
    assert gw.amount("/api/v1/images/generations", json=body) == 45_000  # 0.03 x 3 x 0.5
    native = {"model": "flux-2-pro", "prompt": "a fox", "variants": 4}
    assert gw.amount("/api/v1/image/generate", json=native) == 60_000


def test_image_price_per_resolution(gw):
    body = {"model": "nano-banana-pro", "prompt": "a fox"}
    assert gw.amount("/api/v1/image/generate", json=body) == 90_000  # 1K: 0.18 x 0.5
    two_k = {**body, "resolution": "2K", "variants": 2}
    assert gw.amount("/api/v1/image/generate", json=two_k) == 230_000  # 0.23 x 2 x 0.5
    error_of(
        gw.post("/api/v1/image/generate", json={**body, "resolution": "8K"}), 400, "invalid_request"
    )


def test_edit_and_upscale_list_prices(gw):
    edit = {"model": "qwen-image-2-edit", "prompt": "night", "image": "https://example.org/a.png"}
    assert gw.amount("/api/v1/image/edit", json=edit) == 25_000
    multi = {"model": "firered-image-edit", "prompt": "mix", "images": ["https://e.org/a.png"]}
    assert gw.amount("/api/v1/image/multi-edit", json=multi) == 20_000
    image = "https://example.org/a.png"
    assert gw.amount("/api/v1/image/upscale", json={"image": image, "scale": 2}) == 10_000
    assert gw.amount("/api/v1/image/upscale", json={"image": image, "scale": 4}) == 40_000
    assert gw.amount("/api/v1/image/background-remove", json={"image_url": image}) == 15_000


def test_list_price_above_a_low_maximum_fails_closed(start):
    gw = start(max_charge_usd=0.05)
    body = {"model": "nano-banana-pro", "prompt": "a fox", "resolution": "4K"}
    error_of(gw.post("/api/v1/image/generate", json=body), 400, "charge_exceeds_max")


# -- audio and embeddings ---------------------------------------------------------------------


def test_speech_by_characters(gw):
    body = {"model": "tts-minimax-speech-02-hd", "input": "a" * 4000}
    assert gw.amount("/api/v1/audio/speech", json=body) == 250_000  # 4000 x 125 / 1e6 x 0.5


def test_transcription_by_duration_seconds(gw):
    body = {"model": "openai/whisper-large-v3", "duration_seconds": 3600}
    assert gw.amount("/api/v1/audio/transcriptions", json=body) == 180_000
    scribe = {"model": "elevenlabs/scribe-v2", "duration_seconds": 1000}
    assert gw.amount("/api/v1/audio/transcriptions", json=scribe) == 83_500


def test_voice_clone_list_price(gw):
    files = {"file": ("s.wav", b"sample", "audio/wav")}
    challenge = gw.challenge(
        "/api/v1/audio/voices", data={"model": "tts-chatterbox-hd"}, files=files
    )
    assert challenge["accepts"][0]["amount"] == "125000"


def test_embeddings_estimate(start):
    gw = start(price_mult=1000.0, max_charge_usd=1000.0)
    body = {"model": "text-embedding-bge-m3", "input": ["z" * 400]}
    challenge = gw.challenge("/api/v1/embeddings", json=body)
    # 100 tokens x 0.15 / 1e6 = 0.000015 USD upstream, x 1000
    assert challenge["extensions"]["upstreamUsd"] == pytest.approx(0.000015, abs=1e-15)
    assert challenge["accepts"][0]["amount"] == "15000"


# -- rule 4: crypto RPC -------------------------------------------------------------------------


def _rpc(method, id_=1):
    return {"jsonrpc": "2.0", "method": method, "params": [], "id": id_}


def test_rpc_credits_by_method_tier_and_chain(gw):
    batch = [
        _rpc("eth_blockNumber", 1),  # standard: 30 credits on zkSync
        _rpc("debug_traceTransaction", 2),  # advanced: 60
        _rpc("trace_replayTransaction", 3),  # large: 120
        _rpc("eth_madeUp", 4),  # answered with a JSON-RPC error: 5
    ]
    challenge = gw.challenge("/api/v1/crypto/rpc/zksync-mainnet", json=batch)
    assert challenge["extensions"]["upstreamUsd"] == pytest.approx(215 * 7e-7, abs=1e-15)
    assert challenge["accepts"][0]["amount"] == "10000"  # the minimum


def test_rpc_price_is_credits_times_7e_7_times_mult(start):
    gw = start(price_mult=10.0)
    batch = [_rpc("trace_replayTransaction", i) for i in range(100)]  # 100 x 30 x 4 credits
    challenge = gw.challenge("/api/v1/crypto/rpc/zksync-mainnet", json=batch)
    assert challenge["accepts"][0]["amount"] == "84000"  # 12000 x 7e-7 x 10 USD
    response = gw.pay("/api/v1/crypto/rpc/zksync-mainnet", json=batch)
    assert response.headers["x-rpc-credits"] == "12000"
    one = gw.challenge("/api/v1/crypto/rpc/ethereum-mainnet", json=_rpc("eth_chainId"))
    assert one["extensions"]["upstreamUsd"] == pytest.approx(20 * 7e-7, abs=1e-15)


# -- augment configured rate ------------------------------------------------------------------

AUGMENT = [
    ("/api/v1/augment/search", {"query": "x402"}),
    ("/api/v1/augment/scrape", {"url": "https://example.org"}),
    ("/api/v1/augment/text-parser", {"file": "aGVsbG8="}),
]


@pytest.mark.parametrize(("path", "body"), AUGMENT)
def test_augment_routes_cost_the_configured_rate(gw, path, body):
    challenge = gw.challenge(path, json=body)
    assert challenge["extensions"]["upstreamUsd"] == 0.005
    assert challenge["accepts"][0]["amount"] == "10000"  # 0.0025, raised to the minimum


def test_augment_rate_follows_the_multiplier(start):
    gw = start(price_mult=4.0)
    assert gw.amount("/api/v1/augment/search", json={"query": "x402"}) == 20_000


def test_video_transcription_configured_rate(gw):
    body = {"url": "https://youtu.be/dQw4w9WgXcQ"}
    challenge = gw.challenge("/api/v1/video/transcriptions", json=body)
    assert challenge["extensions"]["upstreamUsd"] == 0.01
    assert challenge["accepts"][0]["amount"] == "10000"


# -- rule 5: music and video quote = queue --------------------------------------------------------

MUSIC_QUOTES = [
    ({"model": "ace-step-15", "duration_seconds": 60}, 0.015, 0.03),
    ({"model": "ace-step-15", "duration_seconds": 210}, 0.04, 0.08),
    ({"model": "ace-step-15", "duration_seconds": "150"}, 0.03, 0.06),
    ({"model": "elevenlabs-music", "duration_seconds": 90}, 0.69, 1.38),
    ({"model": "elevenlabs-tts-v3", "character_count": 1000}, 0.0575, 0.115),
    ({"model": "elevenlabs-sound-effects-v2", "duration_seconds": 10}, 0.0115, 0.023),
    ({"model": "minimax-music-v2"}, 0.02, 0.04),
    ({"model": "ace-step-15"}, 0.015, 0.03),  # the model's default duration (60)
]


@pytest.mark.parametrize(("body", "quote", "upstream"), MUSIC_QUOTES)
def test_audio_quote_is_the_agent_charge(gw, body, quote, upstream):
    answer = gw.post("/api/v1/audio/quote", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"quote": quote, "upstreamUsd": upstream}


@pytest.mark.parametrize("seconds", [60, 90, 120, 150, 180, 210])
def test_audio_queue_402_equals_the_quote(gw, seconds):
    quote = gw.post(
        "/api/v1/audio/quote", json={"model": "ace-step-15", "duration_seconds": seconds}
    )
    body = {"model": "ace-step-15", "prompt": "lofi beat", "duration_seconds": seconds}
    challenge = gw.challenge("/api/v1/audio/queue", json=body)
    assert int(challenge["accepts"][0]["amount"]) == round(quote.json()["quote"] * 1_000_000)
    assert challenge["extensions"]["upstreamUsd"] == quote.json()["upstreamUsd"]


def test_queue_prices_the_prompt_it_reads_not_a_client_count(gw):
    prompt = "Read this aloud, slowly. " * 40  # 1000 characters
    body = {"model": "elevenlabs-tts-v3", "prompt": prompt, "character_count": 1}
    quote = gw.post(
        "/api/v1/audio/quote", json={"model": "elevenlabs-tts-v3", "character_count": len(prompt)}
    ).json()
    assert gw.amount("/api/v1/audio/queue", json=body) == round(quote["quote"] * 1_000_000)


def test_audio_quote_strips_a_prompt(gw):
    body = {"model": "ace-step-15", "duration_seconds": 60, "prompt": "ignored"}
    assert gw.post("/api/v1/audio/quote", json=body).json()["quote"] == 0.015


VIDEO_QUOTES = [
    ({"model": "wan-2-7-text-to-video", "duration": "5s", "resolution": "480p"}, 0.175, 0.35),
    (
        {"model": "wan-2-7-text-to-video", "duration": "5s", "resolution": "480p", "audio": False},
        0.125,
        0.25,
    ),
    (
        {
            "model": "wan-2-7-text-to-video",
            "duration": "10s",
            "resolution": "1080p",
            "aspect_ratio": "9:16",
        },
        0.85,
        1.7,
    ),
    ({"model": "kling-3-0-text-to-video", "duration": "15s", "resolution": "1080p"}, 2.1, 4.2),
    ({"model": "kling-3-0-text-to-video", "duration": 5}, 0.35, 0.7),
]


@pytest.mark.parametrize(("body", "quote", "upstream"), VIDEO_QUOTES)
def test_video_quote_and_queue_402_agree(gw, body, quote, upstream):
    answer = gw.post("/api/v1/video/quote", json=body).json()
    assert answer["quote"] == pytest.approx(quote, abs=1e-9)
    assert answer["upstreamUsd"] == pytest.approx(upstream, abs=1e-9)
    challenge = gw.challenge("/api/v1/video/queue", json={**body, "prompt": "waves"})
    assert int(challenge["accepts"][0]["amount"]) == round(quote * 1_000_000)


def test_queue_never_takes_an_amount_from_the_client(gw):
    body = {
        "model": "kling-3-0-text-to-video",
        "prompt": "waves",
        "duration": "10s",
        "resolution": "720p",
        "quote": 0.01,
        "amount": "1",
        "price": 0.01,
    }
    assert gw.amount("/api/v1/video/queue", json=body) == 700_000  # 0.14 x 10 x 0.5


def test_video_above_the_maximum_fails_closed(gw):
    body = {"model": "veo-4-text-to-video", "duration": "30s", "resolution": "4k", "audio": True}
    # (3.0 + 0.5) x 30 = 105 USD upstream, 52.5 USD agent
    error_of(gw.post("/api/v1/video/quote", json=body), 400, "charge_exceeds_max")
    queue = gw.post("/api/v1/video/queue", json={**body, "prompt": "epic"})
    error_of(queue, 400, "charge_exceeds_max")
    assert "payment-required" not in queue.headers
