"""Every paid synchronous route of the gateway, sync and async, over real sockets.

Each call pays its 402 once: the result carries a settled ``cost`` whose ledger row says the
same, and its answer is parsed (bytes for media, text, vectors, JSON-RPC).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from support.client import (
    ASR_MODEL,
    CHAT_MODEL,
    CLONE_MODEL,
    EDIT_MODEL,
    EMBED_MODEL,
    IMAGE_MODEL,
    IMAGE_URL,
    TTS_MODEL,
    YOUTUBE_URL,
    settings,
    wav_bytes,
)

import x402lab as xl
from x402lab.gateway import chat_body
from x402lab.gateway.results import (
    EmbeddingResult,
    ImageResult,
    MediaResult,
    ResponsesResult,
    Result,
    RpcResult,
    SearchResult,
    TextResult,
    VoiceResult,
)

PNG = b"\x89PNG\r\n\x1a\n"
SMALL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def _png(result: Any) -> None:
    assert isinstance(result, MediaResult)
    assert result.bytes.startswith(PNG)
    assert result.content_type == "image/png"


def _check_responses(r: Any) -> None:
    assert isinstance(r, ResponsesResult)
    assert r.text.startswith("Simulated answer")
    assert r.status == "incomplete" and r.truncated  # cut at max_output_tokens


def _check_embed(r: Any) -> None:
    assert isinstance(r, EmbeddingResult)
    assert r.vectors.shape == (2, 1024) and r.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(r.vectors, axis=1), 1.0, atol=1e-5)


def _check_images(r: Any) -> None:
    assert isinstance(r, ImageResult)
    assert len(r.images) == 2 and all(i.startswith(PNG) for i in r.images)
    assert "<img" in (r._repr_html_() or "")


def _check_openai_images(r: Any) -> None:
    assert isinstance(r, ImageResult)
    assert len(r.images) == 1
    assert (r._repr_png_() or b"").startswith(PNG)


def _check_speech(r: Any) -> None:
    assert isinstance(r, MediaResult)
    assert r.content_type == "audio/wav" and r.bytes.startswith(b"RIFF")
    assert "<audio controls" in (r._repr_html_() or "")


def _check_text(expected_start: str = "") -> Callable[[Any], None]:
    def check(r: Any) -> None:
        assert isinstance(r, TextResult)
        assert r.text and r.text.startswith(expected_start)
        assert str(r) == r.text

    return check


def _check_voice(r: Any) -> None:
    assert isinstance(r, VoiceResult)
    assert r.voice_id and r.voice_id.startswith("vv_")
    assert r.model == CLONE_MODEL


def _check_search(r: Any) -> None:
    assert isinstance(r, SearchResult)
    assert len(r.results) == 3
    frame = r.to_pandas()
    assert list(frame.columns) == ["title", "url", "content", "date"] and len(frame) == 3


def _check_rpc(r: Any) -> None:
    assert isinstance(r, RpcResult)
    assert r.result == hex(8453) and r.error is None
    assert r.credits == 20


def _check_call(r: Any) -> None:
    assert type(r) is Result
    assert r.data["query"] == "generic call"


# (name, path in the ledger, call on a sync Lab or an AsyncLab, check of the result)
ROUTES: list[tuple[str, str, Callable[[Any], Any], Callable[[Any], None]]] = [
    (
        "responses",
        "/api/v1/responses",
        lambda lab: lab.responses("hello", model=CHAT_MODEL, max_output_tokens=5),
        _check_responses,
    ),
    (
        "embed",
        "/api/v1/embeddings",
        lambda lab: lab.embed(["a b", "c d"], model=EMBED_MODEL),
        _check_embed,
    ),
    (
        "generate_image",
        "/api/v1/image/generate",
        lambda lab: lab.generate_image("a lighthouse", model=IMAGE_MODEL, n=2, width=64, height=64),
        _check_images,
    ),
    (
        "generate_image_openai",
        "/api/v1/images/generations",
        lambda lab: lab.generate_image(
            "a lighthouse", model=IMAGE_MODEL, openai=True, size="256x256"
        ),
        _check_openai_images,
    ),
    (
        "edit_image",
        "/api/v1/image/edit",
        lambda lab: lab.edit_image(IMAGE_URL, "make it night", model=EDIT_MODEL),
        _png,
    ),
    (
        "multi_edit_image",
        "/api/v1/image/multi-edit",
        lambda lab: lab.multi_edit_image([IMAGE_URL, SMALL_PNG], "combine", model=EDIT_MODEL),
        _png,
    ),
    (
        "upscale_image",
        "/api/v1/image/upscale",
        lambda lab: lab.upscale_image(SMALL_PNG, scale=4),
        _png,
    ),
    (
        "remove_background",
        "/api/v1/image/background-remove",
        lambda lab: lab.remove_background(IMAGE_URL),
        _png,
    ),
    (
        "speech",
        "/api/v1/audio/speech",
        lambda lab: lab.speech("Hello there", model=TTS_MODEL, voice="af_sky"),
        _check_speech,
    ),
    (
        "transcribe",
        "/api/v1/audio/transcriptions",
        lambda lab: lab.transcribe(model=ASR_MODEL, duration_seconds=12),
        _check_text(),
    ),
    (
        "transcribe_url",
        "/api/v1/audio/transcriptions",
        lambda lab: lab.transcribe(
            "https://example.org/a.wav", model=ASR_MODEL, duration_seconds=3
        ),
        _check_text(),
    ),
    (
        "transcribe_upload",
        "/api/v1/audio/transcriptions",
        lambda lab: lab.transcribe(wav_bytes(), model=ASR_MODEL),
        _check_text(),
    ),
    (
        "clone_voice",
        "/api/v1/audio/voices",
        lambda lab: lab.clone_voice(wav_bytes(), model=CLONE_MODEL),
        _check_voice,
    ),
    (
        "transcribe_video",
        "/api/v1/video/transcriptions",
        lambda lab: lab.transcribe_video(YOUTUBE_URL),
        _check_text(),
    ),
    (
        "search",
        "/api/v1/augment/search",
        lambda lab: lab.search("x402 payments", limit=3),
        _check_search,
    ),
    (
        "scrape",
        "/api/v1/augment/scrape",
        lambda lab: lab.scrape("https://example.org"),
        _check_text("# https://example.org"),
    ),
    (
        "parse_document",
        "/api/v1/augment/text-parser",
        lambda lab: lab.parse_document(b"hello document", filename="note.txt"),
        _check_text("hello document"),
    ),
    (
        "rpc",
        "/api/v1/crypto/rpc/base-mainnet",
        lambda lab: lab.rpc("base-mainnet", "eth_chainId"),
        _check_rpc,
    ),
    (
        "call",
        "/api/v1/augment/search",
        lambda lab: lab.call("POST", "/api/v1/augment/search", {"query": "generic call"}),
        _check_call,
    ),
]


def _check_paid(result: Any, path: str, ledger: xl.Ledger) -> None:
    cost = result.cost
    assert cost is not None and cost.status == "settled"
    assert cost.amount_atomic == cost.quoted_atomic > 0
    assert cost.tx_hash and cost.tx_hash.startswith("0x")
    assert cost.network == "eip155:8453" and cost.receipt["success"] is True
    assert cost.price_mult == 0.5 and cost.upstream_usd is not None
    row = ledger.row(cost.ledger_id)
    assert row is not None
    assert (row["status"], row["path"], row["amount_atomic"], row["tx_hash"]) == (
        "settled",
        path,
        cost.amount_atomic,
        cost.tx_hash,
    )


@pytest.mark.parametrize(("name", "path", "send", "check"), ROUTES, ids=[r[0] for r in ROUTES])
def test_every_paid_route_sync(lab, name, path, send, check):
    result = send(lab)
    check(result)
    _check_paid(result, path, lab.ledger)


def test_every_paid_route_async_concurrently(tmp_path):
    async def main() -> list[Any]:
        async with xl.connect_async(
            ledger=tmp_path / "ledger.sqlite", emulator_settings=settings()
        ) as alab:
            results = await asyncio.gather(*(send(alab) for _, _, send, _ in ROUTES))
            ledger = alab.ledger
            for (_, path, _, check), result in zip(ROUTES, results, strict=True):
                check(result)
                _check_paid(result, path, ledger)
            return results

    results = asyncio.run(main())
    assert len({r.cost.tx_hash for r in results}) == len(ROUTES)


def test_paid_amount_equals_the_free_quote(lab):
    body = chat_body("Name three rivers.", model=CHAT_MODEL, max_tokens=300)
    quote = lab.quote("POST", "/api/v1/chat/completions", body)
    assert lab.ledger.rows() == []  # quoting signs nothing
    result = lab.chat("Name three rivers.", model=CHAT_MODEL, max_tokens=300)
    assert result.cost.amount_atomic == quote.amount_atomic
    assert result.cost.upstream_usd == quote.upstream_usd
    assert result.paid_usd == quote.amount_usd == Decimal(quote.amount_atomic) / 10**6


def test_money_on_results_adds_up_exactly(lab):
    # Thirty 0.01 USD searches summed as floats print 0.30000000000000004: results give Decimals.
    results = [lab.search(f"rivers of country {i}") for i in range(30)]
    total = sum(r.paid_usd for r in results)
    assert isinstance(total, Decimal)
    assert total == Decimal(sum(r.cost.amount_atomic for r in results)) / 10**6


def test_media_results_save_their_bytes(lab, tmp_path):
    speech = lab.speech("Hello", model=TTS_MODEL)
    saved = speech.save(tmp_path / "hello.wav")
    assert saved.read_bytes() == speech.bytes
    images = lab.generate_image("two moons", model=IMAGE_MODEL, n=2, width=32, height=32)
    paths = images.save_all(tmp_path / "moons")
    assert [p.read_bytes() for p in paths] == images.images


def test_image_inputs_as_files_and_json_answers(lab, tmp_path):
    picture = tmp_path / "in.png"
    picture.write_bytes(SMALL_PNG)
    edited = lab.edit_image(picture, "add a hat", model=EDIT_MODEL, return_binary=False)
    assert isinstance(edited, ImageResult) and edited.images[0].startswith(PNG)
    with pytest.raises(xl.ConfigError, match="scale"):
        lab.upscale_image(picture, scale=3)
    assert lab.ledger.rows(where="status != 'settled'") == []


def test_cloned_voice_speaks(lab):
    voice = lab.clone_voice(wav_bytes(), model=CLONE_MODEL)
    spoken = lab.speech("Hi", model=CLONE_MODEL, voice=voice.voice_id)
    assert spoken.bytes.startswith(b"RIFF")


def test_rpc_error_is_paid_and_reported(lab):
    answer = lab.rpc("ethereum-mainnet", "eth_noSuchMethod")
    assert answer.result is None and answer.error["code"] == -32601
    assert answer.cost.status == "settled"


def test_image_given_as_long_base64_text_is_sent_as_is(lab):
    encoded = base64.b64encode(SMALL_PNG * 400).decode("ascii")  # longer than any file name
    result = lab.upscale_image(encoded, scale=2)
    assert result.bytes.startswith(PNG)
