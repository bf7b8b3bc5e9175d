"""Gateway paid synchronous routes, their challenge, authentication, errors (docs/services.md)."""

from __future__ import annotations

import base64
import io
import json
import time
import wave
import zipfile

import httpx
import pytest
from support.gateway import Gateway, error_of, receipt_of

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.tokens import BASE_USDC

CHAT = "/api/v1/chat/completions"
HELLO = {"model": "zai-org-glm-4.7-flash", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def gw(emulator, payer):
    with httpx.Client(base_url=emulator.gateway_url, timeout=30) as client:
        yield Gateway(client, payer)


def _paid_ok(response: httpx.Response) -> httpx.Response:
    assert response.status_code == 200, response.text
    receipt = receipt_of(response)
    assert receipt["success"] is True and receipt["transaction"].startswith("0x")
    return response


# -- the challenge ------------------------------------------------------------------------------


def test_challenge_has_every_field_of_spec_2_1(gw, emulator):
    response = gw.post(CHAT, json=HELLO)
    assert response.status_code == 402
    challenge = decode_header(response.headers["payment-required"])
    assert response.json() == challenge  # the body mirrors the header
    assert challenge["x402Version"] == 2
    assert "payment" in challenge["error"].lower() or "PAYMENT" in challenge["error"]
    resource = challenge["resource"]
    assert resource["url"] == f"{emulator.gateway_url}{CHAT}"
    for key in ("description", "serviceName", "iconUrl"):
        assert isinstance(resource[key], str) and resource[key]
    entry = challenge["accepts"][0]
    assert entry["scheme"] == "exact"
    assert entry["network"] == "eip155:8453"
    assert entry["asset"] == BASE_USDC.address
    assert entry["amount"].isdigit()
    assert entry["payTo"] == RECEIVER_ADDRESS
    assert entry["maxTimeoutSeconds"] == 300
    assert entry["extra"] == {"name": "USD Coin", "version": "2"}
    extensions = challenge["extensions"]
    assert isinstance(extensions["upstreamUsd"], float)
    assert extensions["priceMult"] == 0.5
    bazaar = extensions["bazaar"]
    assert bazaar["info"]["input"]["method"] == "POST"
    body_schema = bazaar["schema"]["properties"]["input"]["properties"]["body"]
    assert body_schema["required"] == ["model", "messages"]
    assert "max_tokens" in body_schema["properties"]


def test_bazaar_schema_describes_each_routes_inputs(gw):
    challenge = gw.challenge("/api/v1/augment/search", json={"query": "x402"})
    body = challenge["extensions"]["bazaar"]["schema"]["properties"]["input"]["properties"]["body"]
    assert body["required"] == ["query"] and "limit" in body["properties"]
    rpc = gw.challenge(
        "/api/v1/crypto/rpc/base-mainnet",
        json={"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1},
    )
    assert rpc["extensions"]["bazaar"]["info"]["input"]["pathParams"] == {"network": "base-mainnet"}


def test_every_paid_route_challenge_carries_the_pricing_extensions(gw):
    doc = gw.get("/openapi.json").json()
    paid = [
        (path, op["post"])
        for path, op in doc["paths"].items()
        if "post" in op and "402" in op["post"]["responses"]
    ]
    assert len(paid) == 19
    for path, operation in paid:
        url = path.replace("{network}", "base-mainnet")
        content = operation["requestBody"]["content"]
        if "multipart/form-data" in content:
            files = {"file": ("sample.wav", b"RIFF sample", "audio/wav")}
            response = gw.post(url, data={"model": "tts-chatterbox-hd"}, files=files)
        else:
            response = gw.post(url, json=content["application/json"]["example"])
        assert response.status_code == 402, (path, response.text)
        challenge = decode_header(response.headers["payment-required"])
        extensions = challenge["extensions"]
        assert extensions["priceMult"] == 0.5, path
        assert extensions["upstreamUsd"] >= 0, path
        assert int(challenge["accepts"][0]["amount"]) >= 10_000, path
        schema = extensions["bazaar"]["schema"]["properties"]["input"]["properties"]["body"]
        body_schema = content[next(iter(content))]["schema"]
        assert schema == body_schema, path


# -- authentication ------------------------------------------------------------------------------


def test_free_routes_need_nothing(gw):
    for path in ("/api/v1/models", "/openapi.json", "/llms.txt", "/.well-known/x402.json"):
        assert gw.get(path).status_code == 200


@pytest.mark.parametrize("header", ["PAYMENT-SIGNATURE", "X-402-Payment", "X-Payment"])
def test_payment_header_and_its_aliases_are_accepted(gw, header):
    response = _paid_ok(gw.pay(CHAT, json=HELLO, header=header))
    assert response.json()["object"] == "chat.completion"


def test_receipt_names_payer_network_and_amount(gw, emulator, payer):
    before = emulator.chain.balance_of(payer.address)
    response = _paid_ok(gw.pay(CHAT, json=HELLO))
    receipt = receipt_of(response)
    assert receipt["network"] == "eip155:8453"
    assert receipt["payer"].lower() == payer.address.lower()
    assert emulator.chain.balance_of(payer.address) == before - 10_000


def test_settlement_failure_is_an_error_and_moves_nothing(emulator_factory, payer):
    emulator = emulator_factory(settle_fail_rate=1.0)
    with httpx.Client(base_url=emulator.gateway_url) as client:
        gw = Gateway(client, payer)
        before = emulator.chain.balance_of(payer.address)
        response = gw.pay(CHAT, json=HELLO)
    assert response.status_code == 402
    assert receipt_of(response)["success"] is False
    assert response.json()["error"]  # the reason, in the challenge's error field
    assert emulator.chain.balance_of(payer.address) == before


def test_testnet_payment_is_refused(gw, emulator, payer):
    challenge = gw.challenge(CHAT, json=HELLO)
    header = payer.header(
        challenge,
        changes={
            "network": "eip155:84532",
            "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
            "extra": {"name": "USDC", "version": "2"},
        },
    )
    before = emulator.chain.balance_of(payer.address)
    response = gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": header})
    assert response.status_code in (400, 402)
    assert "payment-response" not in response.headers or not receipt_of(response)["success"]
    assert emulator.chain.balance_of(payer.address) == before


def test_replay_underpayment_wrong_receiver_expired_are_refused(gw, emulator, payer):
    challenge = gw.challenge(CHAT, json=HELLO)
    header = payer.header(challenge)
    _paid_ok(gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": header}))
    balance = emulator.chain.balance_of(payer.address)
    replay = gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": header})
    assert replay.status_code == 402
    under = payer.header(challenge, changes={"amount": "9999"})
    assert gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": under}).status_code == 402
    other = payer.header(challenge, changes={"payTo": "0x" + "ab" * 20})
    assert gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": other}).status_code == 402
    expired = payer.header(challenge, now=time.time() - 3600)
    assert gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": expired}).status_code == 402
    assert emulator.chain.balance_of(payer.address) == balance


def test_a_payment_for_another_request_is_refused(gw, emulator, payer):
    cheap = gw.challenge(CHAT, json=HELLO)
    dearer = {**HELLO, "model": "openai-gpt-54-pro"}
    header = payer.header(cheap)
    response = gw.post(CHAT, json=dearer, headers={"PAYMENT-SIGNATURE": header})
    assert response.status_code == 402


def test_malformed_payment_header_is_400(gw):
    response = gw.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": "not base64 json!"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_payload"


# -- errors: the model field --------------------------------------------------------------------

MODEL_ROUTES = [
    (CHAT, {"messages": [{"role": "user", "content": "hi"}]}),
    ("/api/v1/responses", {"input": "hi"}),
    ("/api/v1/embeddings", {"input": "hi"}),
    ("/api/v1/image/generate", {"prompt": "a cat"}),
    ("/api/v1/images/generations", {"prompt": "a cat"}),
    ("/api/v1/image/edit", {"prompt": "night", "image": "https://example.org/a.png"}),
    ("/api/v1/image/multi-edit", {"prompt": "mix", "images": ["https://example.org/a.png"]}),
    ("/api/v1/audio/speech", {"input": "hello"}),
    ("/api/v1/audio/transcriptions", {"duration_seconds": 10}),
    ("/api/v1/audio/queue", {"prompt": "calm piano", "duration_seconds": 60}),
    ("/api/v1/video/queue", {"prompt": "waves", "duration": "5s"}),
    ("/api/v1/audio/quote", {"duration_seconds": 60}),
    ("/api/v1/video/quote", {"duration": "5s"}),
]


@pytest.mark.parametrize(("path", "body"), MODEL_ROUTES)
def test_missing_model_is_400_with_hint_never_402(gw, path, body):
    body = error_of(gw.post(path, json=body), 400, "model_required")
    assert "/api/v1/models" in body["hint"]


@pytest.mark.parametrize(("path", "body"), MODEL_ROUTES)
def test_unknown_model_is_400_with_close_ids(gw, path, body):
    response = gw.post(path, json={**body, "model": "zai-org-glm-5-3-typo"})
    error = error_of(response, 400, "model_not_found")
    assert error["hint"]
    assert "payment-required" not in response.headers


def test_unknown_model_hint_names_close_ids(gw):
    error = error_of(gw.post(CHAT, json={**HELLO, "model": "kimi-k2"}), 400, "model_not_found")
    assert "kimi-k3" in error["suggestions"] and "kimi-k3" in error["hint"]


def test_unpriced_model_is_400_not_a_cheap_floor(gw):
    error = error_of(
        gw.post(CHAT, json={**HELLO, "model": "hermes-uncensored-preview"}), 400, "model_unpriced"
    )
    assert "zai-org" in error["hint"]
    video = {"model": "flux-3-text-to-video", "duration": "5s"}
    error_of(gw.post("/api/v1/video/quote", json=video), 400, "model_unpriced")
    error_of(gw.post("/api/v1/video/queue", json={**video, "prompt": "x"}), 400, "model_unpriced")


def test_model_of_another_type_is_400(gw):
    error_of(gw.post(CHAT, json={**HELLO, "model": "z-image-turbo"}), 400, "model_wrong_type")


def test_invalid_json_and_bad_fields_are_400_before_any_402(gw):
    bad = gw.post(CHAT, content=b"{not json", headers={"content-type": "application/json"})
    error_of(bad, 400, "invalid_json")
    error_of(gw.post(CHAT, json=[1, 2]), 400, "invalid_json")
    error_of(gw.post(CHAT, json={**HELLO, "messages": []}), 400, "invalid_request")
    error_of(gw.post(CHAT, json={**HELLO, "max_tokens": 0}), 400, "invalid_request")
    error_of(gw.post(CHAT, json={**HELLO, "max_tokens": "ten"}), 400, "invalid_request")


# -- each paid route --------------------------------------------------------------------------


def test_chat_completion(gw):
    body = _paid_ok(gw.pay(CHAT, json={**HELLO, "max_tokens": 500})).json()
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert body["model"] == HELLO["model"]


def test_chat_small_max_tokens_ends_with_length(gw):
    body = _paid_ok(gw.pay(CHAT, json={**HELLO, "max_tokens": 3})).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3
    assert len(body["choices"][0]["message"]["content"].split()) == 3


def test_chat_max_completion_tokens_also_cuts(gw):
    body = _paid_ok(gw.pay(CHAT, json={**HELLO, "max_completion_tokens": 2})).json()
    assert body["choices"][0]["finish_reason"] == "length"


def test_thinking_model_answers_in_reasoning_content_with_empty_content(gw):
    body = {"model": "kimi-k3", "messages": [{"role": "user", "content": "why?"}]}
    message = _paid_ok(gw.pay(CHAT, json=body)).json()["choices"][0]["message"]
    assert message["content"] == ""
    assert message["reasoning_content"]
    assert message["reasoning_details"][0]["text"] == message["reasoning_content"]


def test_disable_thinking_gives_plain_content(gw):
    body = {
        "model": "kimi-k3",
        "messages": [{"role": "user", "content": "why?"}],
        "provider_parameters": {"disable_thinking": True},
    }
    message = _paid_ok(gw.pay(CHAT, json=body)).json()["choices"][0]["message"]
    assert message["content"] and "reasoning_content" not in message


def test_chat_answers_are_deterministic(emulator_factory, payer):
    answers = []
    for _ in range(2):
        emulator = emulator_factory(seed=7)
        with httpx.Client(base_url=emulator.gateway_url) as client:
            body = Gateway(client, payer).pay(CHAT, json=HELLO).json()
        answers.append(body["choices"][0]["message"]["content"])
    assert answers[0] == answers[1]


def test_chat_streaming_sse(gw):
    response = _paid_ok(gw.pay(CHAT, json={**HELLO, "stream": True, "max_tokens": 9}))
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in response.text.split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert len(text.split()) == 9
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 9


def test_responses_route(gw):
    body = {"model": "zai-org-glm-5-2", "input": "Say hello", "max_output_tokens": 4}
    answer = _paid_ok(gw.pay("/api/v1/responses", json=body)).json()
    assert answer["object"] == "response" and answer["status"] == "incomplete"
    assert answer["output"][0]["content"][0]["type"] == "output_text"
    assert answer["usage"]["output_tokens"] == 4


def test_embeddings_string_and_list(gw):
    single = {"model": "text-embedding-bge-m3", "input": "the cat sat"}
    data = _paid_ok(gw.pay("/api/v1/embeddings", json=single)).json()
    vector = data["data"][0]["embedding"]
    assert len(vector) == 1024
    assert abs(sum(x * x for x in vector) - 1.0) < 1e-9
    assert data["usage"]["prompt_tokens"] == 3
    many = {"model": "text-embedding-bge-m3", "input": ["the cat sat", "a dog ran"]}
    data2 = _paid_ok(gw.pay("/api/v1/embeddings", json=many)).json()
    assert [d["index"] for d in data2["data"]] == [0, 1]
    assert data2["data"][0]["embedding"] == vector  # stable for the same text


def test_embeddings_base64_and_dimensions(gw):
    body = {
        "model": "text-embedding-qwen3-0-6b",
        "input": "hello",
        "dimensions": 8,
        "encoding_format": "base64",
    }
    data = _paid_ok(gw.pay("/api/v1/embeddings", json=body)).json()
    raw = base64.b64decode(data["data"][0]["embedding"])
    assert len(raw) == 8 * 4
    error_of(
        gw.post("/api/v1/embeddings", json={**body, "model": "text-embedding-bge-m3"}),
        400,
        "invalid_request",
    )


def _is_png(data: bytes) -> bool:
    return data.startswith(b"\x89PNG\r\n\x1a\n")


def test_image_generate_json_and_binary(gw):
    body = {"model": "z-image-turbo", "prompt": "a lighthouse", "variants": 2}
    data = _paid_ok(gw.pay("/api/v1/image/generate", json=body)).json()
    assert len(data["images"]) == 2 and _is_png(base64.b64decode(data["images"][0]))
    binary = {"model": "z-image-turbo", "prompt": "a lighthouse", "return_binary": True}
    response = _paid_ok(gw.pay("/api/v1/image/generate", json=binary))
    assert response.headers["content-type"] == "image/png" and _is_png(response.content)


def test_images_generations_openai_shape(gw):
    body = {"model": "flux-2-pro", "prompt": "a fox", "n": 2, "size": "512x512"}
    data = _paid_ok(gw.pay("/api/v1/images/generations", json=body)).json()
    assert len(data["data"]) == 2 and _is_png(base64.b64decode(data["data"][0]["b64_json"]))
    url = {**body, "n": 1, "response_format": "url"}
    data = _paid_ok(gw.pay("/api/v1/images/generations", json=url)).json()
    assert data["data"][0]["url"].startswith("data:image/png;base64,")


def test_image_edit_default_png_and_json_when_asked(gw):
    body = {"model": "firered-image-edit", "prompt": "night", "image": "https://example.org/a.png"}
    response = _paid_ok(gw.pay("/api/v1/image/edit", json=body))
    assert response.headers["content-type"] == "image/png" and _is_png(response.content)
    data = _paid_ok(gw.pay("/api/v1/image/edit", json={**body, "return_binary": False})).json()
    assert _is_png(base64.b64decode(data["images"][0]))


def test_image_multi_edit(gw):
    body = {
        "modelId": "qwen-image-2-edit",
        "prompt": "combine",
        "images": ["https://example.org/a.png", "https://example.org/b.png"],
    }
    response = _paid_ok(gw.pay("/api/v1/image/multi-edit", json=body))
    assert _is_png(response.content)
    too_many = {**body, "images": ["https://example.org/a.png"] * 6}
    error_of(gw.post("/api/v1/image/multi-edit", json=too_many), 400, "invalid_request")


@pytest.mark.parametrize("scale", [2, 4])
def test_image_upscale(gw, scale):
    response = _paid_ok(
        gw.pay("/api/v1/image/upscale", json={"image": "https://example.org/a.png", "scale": scale})
    )
    assert _is_png(response.content)


def test_image_upscale_bad_scale_is_400(gw):
    body = {"image": "https://example.org/a.png", "scale": 3}
    error_of(gw.post("/api/v1/image/upscale", json=body), 400, "invalid_request")


def test_background_remove(gw):
    body = {"image_url": "https://example.org/a.png"}
    assert _is_png(_paid_ok(gw.pay("/api/v1/image/background-remove", json=body)).content)
    error_of(gw.post("/api/v1/image/background-remove", json={}), 400, "invalid_request")


def test_speech_wav_and_mp3(gw):
    body = {"model": "tts-kokoro", "input": "Hello there", "voice": "af_bella"}
    response = _paid_ok(gw.pay("/api/v1/audio/speech", json=body))
    assert response.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(response.content)) as clip:
        assert clip.getnframes() > 0
    mp3 = _paid_ok(gw.pay("/api/v1/audio/speech", json={**body, "response_format": "mp3"}))
    assert mp3.headers["content-type"] == "audio/mpeg" and mp3.content[:2] == b"\xff\xfb"


def test_speech_bad_voice_and_format_are_400(gw):
    body = {"model": "tts-kokoro", "input": "Hello"}
    error_of(
        gw.post("/api/v1/audio/speech", json={**body, "voice": "Zeus"}), 400, "invalid_request"
    )
    bad_format = {**body, "response_format": "opus"}
    error_of(gw.post("/api/v1/audio/speech", json=bad_format), 400, "invalid_request")


def test_transcriptions_json_text_and_multipart_wav(gw):
    body = {"model": "openai/whisper-large-v3", "duration_seconds": 12, "timestamps": True}
    data = _paid_ok(gw.pay("/api/v1/audio/transcriptions", json=body)).json()
    assert data["text"] and data["duration"] == 12 and data["timestamps"]["word"]
    text = {**body, "response_format": "text"}
    response = _paid_ok(gw.pay("/api/v1/audio/transcriptions", json=text))
    assert response.headers["content-type"].startswith("text/plain")
    sample = io.BytesIO()
    with wave.open(sample, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(b"\x00\x00" * 16000)
    multipart = gw.pay(
        "/api/v1/audio/transcriptions",
        data={"model": "openai/whisper-large-v3"},
        files={"file": ("clip.wav", sample.getvalue(), "audio/wav")},
    )
    assert _paid_ok(multipart).json()["duration"] == 2.0
    error_of(
        gw.post("/api/v1/audio/transcriptions", json={"model": "openai/whisper-large-v3"}),
        400,
        "invalid_request",
    )


def test_voice_clone_multipart_then_speech_with_the_handle(gw):
    files = {"file": ("sample.wav", b"RIFF....WAVEfmt fake sample", "audio/wav")}
    response = _paid_ok(
        gw.pay("/api/v1/audio/voices", data={"model": "tts-chatterbox-hd"}, files=files)
    )
    clone = response.json()
    assert clone["id"].startswith("vv_") and clone["model"] == "tts-chatterbox-hd"
    body = {"model": "tts-chatterbox-hd", "input": "In my own voice", "voice": clone["id"]}
    _paid_ok(gw.pay("/api/v1/audio/speech", json=body))
    other = {**body, "model": "tts-minimax-speech-02-hd"}
    error_of(gw.post("/api/v1/audio/speech", json=other), 400, "invalid_request")


def test_voice_clone_errors(gw):
    files = {"file": ("sample.wav", b"data", "audio/wav")}
    no_clone = gw.post("/api/v1/audio/voices", data={"model": "tts-kokoro"}, files=files)
    error_of(no_clone, 400, "model_wrong_type")
    bad_ext = {"file": ("sample.ogg", b"data", "audio/ogg")}
    error_of(
        gw.post("/api/v1/audio/voices", data={"model": "tts-minimax-speech-02-hd"}, files=bad_ext),
        400,
        "invalid_request",
    )
    error_of(gw.post("/api/v1/audio/voices", json={"model": "x"}), 400, "invalid_request")
    missing = gw.post("/api/v1/audio/voices", files={"file": ("a.wav", b"x", "audio/wav")})
    error_of(missing, 400, "model_required")


def test_video_transcriptions(gw):
    body = {"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"}
    data = _paid_ok(gw.pay("/api/v1/video/transcriptions", json=body)).json()
    assert data["transcript"] and data["lang"] == "en"
    bad = {"url": "https://example.org/video.mp4"}
    error_of(gw.post("/api/v1/video/transcriptions", json=bad), 400, "invalid_request")


def test_augment_search(gw):
    data = _paid_ok(gw.pay("/api/v1/augment/search", json={"query": "x402", "limit": 3})).json()
    assert data["query"] == "x402" and len(data["results"]) == 3
    assert set(data["results"][0]) == {"title", "url", "content", "date"}


def test_augment_scrape(gw):
    data = _paid_ok(gw.pay("/api/v1/augment/scrape", json={"url": "https://example.org/a"})).json()
    assert data["url"] == "https://example.org/a" and data["format"] == "markdown"
    assert data["content"].startswith("# ")
    error_of(gw.post("/api/v1/augment/scrape", json={"url": "ftp://x"}), 400, "invalid_request")


def test_augment_text_parser_json_docx_and_multipart(gw):
    plain = {"file": base64.b64encode(b"hello parser").decode(), "filename": "a.txt"}
    data = _paid_ok(gw.pay("/api/v1/augment/text-parser", json=plain)).json()
    assert data == {"text": "hello parser", "tokens": 3}
    docx = io.BytesIO()
    with zipfile.ZipFile(docx, "w") as archive:
        archive.writestr(
            "word/document.xml",
            "<w:document><w:body><w:p><w:r><w:t>First</w:t></w:r></w:p>"
            "<w:p><w:r><w:t>Second</w:t></w:r></w:p></w:body></w:document>",
        )
    files = {"file": ("doc.docx", docx.getvalue(), "application/octet-stream")}
    response = _paid_ok(
        gw.pay("/api/v1/augment/text-parser", data={"response_format": "text"}, files=files)
    )
    assert response.text == "First\nSecond"
    bad = {"file": "%%%"}
    error_of(gw.post("/api/v1/augment/text-parser", json=bad), 400, "invalid_request")


def test_crypto_rpc_single_and_batch(gw):
    path = "/api/v1/crypto/rpc/base-mainnet"
    one = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    response = _paid_ok(gw.pay(path, json=one))
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": hex(8453)}
    assert response.headers["x-rpc-credits"] == "20"
    batch = [
        {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 1},
        {
            "jsonrpc": "2.0",
            "method": "eth_getBalance",
            "params": ["0x" + "1" * 40, "latest"],
            "id": "b",
        },
        {"jsonrpc": "2.0", "method": "eth_madeUp", "params": [], "id": 3},
    ]
    answers = _paid_ok(gw.pay(path, json=batch)).json()
    assert int(answers[0]["result"], 16) > 20_000_000
    assert answers[1]["id"] == "b" and answers[1]["result"].startswith("0x")
    assert answers[2]["error"]["code"] == -32601


def test_crypto_rpc_unknown_network_and_bad_requests(gw):
    one = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    error_of(gw.post("/api/v1/crypto/rpc/atlantis-mainnet", json=one), 404, "unknown_network")
    error_of(
        gw.post("/api/v1/crypto/rpc/base-mainnet", json={**one, "jsonrpc": "1.0"}),
        400,
        "invalid_request",
    )
    filters = {**one, "method": "eth_newFilter"}
    error_of(gw.post("/api/v1/crypto/rpc/base-mainnet", json=filters), 400, "unsupported_method")
    error_of(gw.post("/api/v1/crypto/rpc/base-mainnet", json=[]), 400, "invalid_request")


def test_solana_rpc(gw):
    body = {"jsonrpc": "2.0", "method": "getSlot", "params": [], "id": 1}
    answer = _paid_ok(gw.pay("/api/v1/crypto/rpc/solana-mainnet", json=body)).json()
    assert isinstance(answer["result"], int)


def test_paid_then_500_fault_settles_without_receipt(emulator_factory, payer):
    emulator = emulator_factory(paid_then_500_rate=1.0)
    with httpx.Client(base_url=emulator.gateway_url) as client:
        gw = Gateway(client, payer)
        before = emulator.chain.balance_of(payer.address)
        response = gw.pay(CHAT, json=HELLO)
    assert response.status_code == 500 and "payment-response" not in response.headers
    assert emulator.chain.balance_of(payer.address) == before - 10_000


def test_rate_limit_fault_is_429_with_retry_after(emulator_factory, payer):
    emulator = emulator_factory(rate_429=1.0)
    response = httpx.post(f"{emulator.gateway_url}{CHAT}", json=HELLO)
    assert response.status_code == 429 and "retry-after" in response.headers
    # free routes are not touched by the fault
    assert httpx.get(f"{emulator.gateway_url}/api/v1/models").status_code == 200


def test_payment_header_value_is_standard_base64_json(gw, payer):
    challenge = gw.challenge(CHAT, json=HELLO)
    payload = payer.sign(challenge).to_wire()
    header = encode_header(payload)
    _paid_ok(gw.post(CHAT, json=HELLO, headers={"payment-signature": header}))


def test_chat_settles_through_a_facilitator_when_configured(emulator_factory, payer):
    from x402lab.emulator.chain import Chain
    from x402lab.emulator.facilitator import start_facilitator

    with start_facilitator(Chain()) as facilitator:
        emulator = emulator_factory(facilitator_url=facilitator.url)
        with httpx.Client(base_url=emulator.gateway_url) as client:
            response = Gateway(client, payer).pay(CHAT, json=HELLO)
        assert _paid_ok(response).json()["object"] == "chat.completion"
        assert facilitator.calls.verify == 1 and facilitator.calls.settle == 1
        assert facilitator.chain.received(RECEIVER_ADDRESS) == 10_000
