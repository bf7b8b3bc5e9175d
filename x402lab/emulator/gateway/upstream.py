"""A deterministic stand-in for the upstream provider (seeded; same request, same answer).

Answers are built from a hash of (seed, model, request), so tests and notebooks see the same
text, vectors and bytes on every run. The shapes follow the upstream reference:

- chat: OpenAI chat completions. A natural answer length is drawn per request; ``max_tokens``
  (or ``max_completion_tokens``) below it cuts the text and ends with ``finish_reason:
  "length"``. Thinking models (``capabilities.supportsReasoning``) answer with empty
  ``content`` and the text in ``reasoning_content``/``reasoning_details``, unless
  ``provider_parameters.disable_thinking`` is true. One simulated token is one word.
- embeddings: a hashed bag of words plus a little per-text noise, L2-normalized, so texts
  that share words are close in cosine similarity and every vector is stable across runs.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import re
import time
import zipfile
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np

from x402lab.emulator.gateway import media, structured
from x402lab.emulator.gateway.catalog import Model
from x402lab.emulator.gateway.pricing import (
    estimate_message_tokens,
    estimate_responses_input_tokens,
    estimate_tokens,
)

_WORDS = re.compile(r"[A-Za-z0-9']+")
_VOCAB = (
    "the data shows a clear pattern across each group and the trend holds when we control for "
    "size season and region so the simplest reading is that demand rises with price while "
    "costs fall slowly which suggests a careful next step measure again with more samples "
    "compare the median not the mean and keep the raw table for later checks"
).split()


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(media.seed_bytes(seed, *parts))


def _request_key(value: Any) -> str:
    return hashlib.sha256(repr(value).encode("utf-8")).hexdigest()[:16]


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    p["text"]
                    for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
    return ""


def _answer_words(rng: random.Random, model: Model, prompt: str) -> list[str]:
    """The full (uncut) answer of a request as a list of words (one word = one token)."""
    topic = [w.lower() for w in _WORDS.findall(prompt)][:8]
    length = rng.randint(24, 72)
    words = ["Simulated", "answer", "from", f"{model.id}:"]
    if topic:
        words += ["about", *topic[:4], "—"]
    while len(words) < length:
        words.append(rng.choice(_VOCAB))
    words[-1] = words[-1] + "."
    return words


def _cut(words: list[str], limit: int | None) -> tuple[list[str], str]:
    if limit is not None and limit < len(words):
        return words[:limit], "length"
    return words, "stop"


class Upstream:
    """The simulated provider behind every paid route."""

    def __init__(
        self,
        seed: int,
        *,
        schema_violation_rate: float = 0.0,
        constraint_violation_rate: float = 0.0,
    ) -> None:
        self.seed = seed
        self.schema_violation_rate = schema_violation_rate
        self.constraint_violation_rate = constraint_violation_rate

    # -- chat --------------------------------------------------------------------------------

    def _chat_plan(self, model: Model, body: dict[str, Any]) -> dict[str, Any]:
        rng = _rng(self.seed, "chat", model.id, _request_key(body.get("messages")))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = limit if isinstance(limit, int) else None
        requested = structured.requested_schema(body)
        if requested is not None:
            return self._structured_plan(model, body, requested, limit, rng)
        words = _answer_words(rng, model, _last_user_text(body.get("messages")))
        words, finish = _cut(words, limit)
        provider = body.get("provider_parameters")
        disable = isinstance(provider, dict) and provider.get("disable_thinking") is True
        thinking = bool(model.spec.get("capabilities", {}).get("supportsReasoning")) and not disable
        return {
            "text": " ".join(words),
            "tokens": len(words),
            "finish": finish,
            "thinking": thinking,
            "prompt_tokens": estimate_message_tokens(body.get("messages")),
            "id": "chatcmpl-" + _request_key((self.seed, model.id, body))[:24],
        }

    def _structured_plan(
        self,
        model: Model,
        body: dict[str, Any],
        requested: tuple[str, structured.Schema | None],
        limit: int | None,
        rng: random.Random,
    ) -> dict[str, Any]:
        """A JSON answer under the request's ``response_format`` (``structured``): no
        thinking, completion tokens counted from the JSON's length (about 4 characters a
        token), cut at ``max_tokens`` like any answer, broken on purpose at
        ``schema_violation_rate`` (and its values put outside the schema's constraints at
        ``constraint_violation_rate``, per entry)."""
        kind, schema = requested
        pricing = model.pricing or {}
        output = pricing.get("output", {})
        value = structured.answer(
            kind,
            schema,
            _last_user_text(body.get("messages")),
            model_id=model.id,
            output_usd_per_m=float(output.get("usd", 1.0)) if isinstance(output, dict) else 1.0,
            seed=self.seed,
        )
        if self.constraint_violation_rate > 0 and schema is not None:
            dice = _rng(self.seed, "constraints", model.id, _request_key(body.get("messages")))
            rate = self.constraint_violation_rate
            value = structured.break_constraints(value, schema, dice, rate)
        text, finish = json.dumps(value, separators=(", ", ": ")), "stop"
        if self.schema_violation_rate > 0 and rng.random() < self.schema_violation_rate:
            text, forced = structured.violate(value, schema, rng.random())
            finish = forced or finish
        tokens = max(1, -(-len(text) // 4))
        if limit is not None and tokens > limit:
            text, tokens, finish = text[: limit * 4], limit, "length"
        return {
            "text": text,
            "tokens": tokens,
            "finish": finish,
            "thinking": False,
            "prompt_tokens": estimate_message_tokens(body.get("messages")),
            "id": "chatcmpl-" + _request_key((self.seed, model.id, body))[:24],
        }

    @staticmethod
    def _usage(plan: dict[str, Any]) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": plan["prompt_tokens"],
            "completion_tokens": plan["tokens"],
            "total_tokens": plan["prompt_tokens"] + plan["tokens"],
        }
        if plan["thinking"]:
            usage["completion_tokens_details"] = {"reasoning_tokens": plan["tokens"]}
        return usage

    def chat(self, model: Model, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI chat completion object."""
        plan = self._chat_plan(model, body)
        message: dict[str, Any] = {"role": "assistant", "content": plan["text"]}
        if plan["thinking"]:
            message = {
                "role": "assistant",
                "content": "",
                "reasoning_content": plan["text"],
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": plan["text"],
                        "format": "unknown",
                        "index": 0,
                    }
                ],
            }
        message["tool_calls"] = []
        return {
            "id": plan["id"],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model.id,
            "choices": [
                {"index": 0, "message": message, "finish_reason": plan["finish"], "logprobs": None}
            ],
            "usage": self._usage(plan),
        }

    def chat_stream(self, model: Model, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The chunks of a streamed chat completion (usage in the last one)."""
        plan = self._chat_plan(model, body)
        created = int(time.time())
        key = "reasoning_content" if plan["thinking"] else "content"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": plan["id"],
                "object": "chat.completion.chunk",
                "created": created,
                "model": model.id,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        words = plan["text"].split(" ")
        for start in range(0, len(words), 4):
            piece = " ".join(words[start : start + 4])
            yield chunk({key: piece if start == 0 else " " + piece})
        last = chunk({}, plan["finish"])
        last["usage"] = self._usage(plan)
        yield last

    def responses(self, model: Model, body: dict[str, Any]) -> dict[str, Any]:
        """A responses-API object (status incomplete when cut by max_output_tokens)."""
        value = body.get("input")
        prompt = value if isinstance(value, str) else repr(value)
        rng = _rng(self.seed, "responses", model.id, _request_key(body.get("input")))
        words = _answer_words(rng, model, prompt)
        limit = body.get("max_output_tokens")
        words, finish = _cut(words, limit if isinstance(limit, int) else None)
        text = " ".join(words)
        input_tokens = estimate_responses_input_tokens(body)
        thinking = bool(model.spec.get("capabilities", {}).get("supportsReasoning"))
        output: list[dict[str, Any]] = []
        if thinking:
            output.append(
                {
                    "type": "reasoning",
                    "id": "rs_" + _request_key(text)[:12],
                    "summary": [{"type": "summary_text", "text": text}],
                }
            )
        output.append(
            {
                "type": "message",
                "id": "msg_" + _request_key(text)[:12],
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "" if thinking else text, "annotations": []}
                ],
            }
        )
        return {
            "id": "resp_" + _request_key((self.seed, model.id, body))[:24],
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed" if finish == "stop" else "incomplete",
            "incomplete_details": None if finish == "stop" else {"reason": "max_output_tokens"},
            "model": model.id,
            "output": output,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": len(words),
                "total_tokens": input_tokens + len(words),
            },
        }

    # -- embeddings --------------------------------------------------------------------------

    def embeddings(
        self, model: Model, texts: list[str], *, dimensions: int | None, encoding: str
    ) -> dict[str, Any]:
        dim = dimensions or int(model.spec.get("embeddingDimensions", 1024))
        data = []
        for index, text in enumerate(texts):
            vector = embed(self.seed, model.id, text, dim)
            value: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                if encoding == "base64"
                else [float(x) for x in vector]
            )
            data.append({"object": "embedding", "index": index, "embedding": value})
        tokens = sum(estimate_tokens(t) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": model.id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    # -- images ------------------------------------------------------------------------------

    def image_png(self, model_id: str, prompt: str, index: int, width: int, height: int) -> bytes:
        w, h = media.preview_size(width, height)
        return media.png(w, h, media.seed_bytes(self.seed, "image", model_id, prompt, index))

    def image_generate(
        self, model: Model, body: dict[str, Any], n: int, width: int, height: int
    ) -> dict[str, Any]:
        prompt = str(body.get("prompt", ""))
        images = [
            base64.b64encode(self.image_png(model.id, prompt, i, width, height)).decode("ascii")
            for i in range(n)
        ]
        return {
            "id": "generate-image-" + _request_key((self.seed, model.id, prompt))[:12],
            "images": images,
            "request": body,
            "timing": {
                "inferenceDuration": 850,
                "inferencePreprocessingTime": 12,
                "inferenceQueueTime": 40,
                "total": 902,
            },
        }

    # -- audio -------------------------------------------------------------------------------

    def speech(self, text: str, voice: str, fmt: str) -> bytes:
        seconds = min(3.0, max(0.5, len(text) / 15))
        if fmt == "mp3":
            return media.mp3(seconds)
        return media.wav(seconds, media.seed_bytes(self.seed, "speech", voice, text))

    def transcription(self, model: Model, seconds: float, timestamps: bool) -> dict[str, Any]:
        rng = _rng(self.seed, "asr", model.id, seconds)
        count = max(3, min(200, int(seconds * 2.5)))
        words = [rng.choice(_VOCAB) for _ in range(count)]
        step = seconds / count
        result: dict[str, Any] = {"text": " ".join(words).capitalize() + ".", "duration": seconds}
        if timestamps:
            result["timestamps"] = {
                "word": [
                    {"word": w, "start": round(i * step, 3), "end": round((i + 1) * step, 3)}
                    for i, w in enumerate(words)
                ],
                "segment": [{"text": result["text"], "start": 0.0, "end": seconds}],
            }
        return result

    def video_transcription(self, url: str) -> dict[str, Any]:
        rng = _rng(self.seed, "yt", url)
        words = [rng.choice(_VOCAB) for _ in range(rng.randint(40, 90))]
        return {"transcript": " ".join(words).capitalize() + ".", "lang": "en"}

    # -- augment -----------------------------------------------------------------------------

    def search(self, query: str, limit: int) -> dict[str, Any]:
        rng = _rng(self.seed, "search", query)
        slug = "-".join(w.lower() for w in _WORDS.findall(query)[:6]) or "result"
        results = []
        for i in range(limit):
            words = " ".join(rng.choice(_VOCAB) for _ in range(18))
            results.append(
                {
                    "title": f"{query[:60]} — source {i + 1}",
                    "url": f"https://example.org/{slug}/{i + 1}",
                    "content": f"{query[:80]}: {words}.",
                    "date": f"2025-{1 + (i % 12):02d}-{1 + rng.randrange(28):02d}",
                }
            )
        return {"query": query, "results": results}

    def scrape(self, url: str) -> dict[str, Any]:
        rng = _rng(self.seed, "scrape", url)
        paragraphs = [
            " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(25, 45))).capitalize() + "."
            for _ in range(3)
        ]
        content = f"# {url}\n\n" + "\n\n".join(paragraphs) + "\n"
        return {"url": url, "content": content, "format": "markdown"}

    def parse_document(self, data: bytes, filename: str) -> str:
        """The text of a document: plain text, DOCX (the paragraphs of its XML) or a PDF (its
        pages' text, read by pypdf: matplotlib's and LaTeX's text runs, fonts' encodings)."""
        if data.startswith(b"PK"):
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    xml = archive.read("word/document.xml").decode("utf-8", "replace")
                paragraphs = re.split(r"</w:p>", xml)
                text = "\n".join(re.sub(r"<[^>]+>", "", p) for p in paragraphs)
                return text.strip()
            except (zipfile.BadZipFile, KeyError):
                pass
        if data.startswith(b"%PDF"):
            return _pdf_text(data)
        return data.decode("utf-8", "replace").strip()


def _pdf_text(data: bytes) -> str:
    """The text of a PDF's pages, one page a paragraph; '' for a PDF pypdf cannot read (a
    scanned page has no text to extract either: the client warns of an empty parse)."""
    import pypdf  # imported here: only a parse of a PDF pays for its import
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError):
        return ""
    return "\n\n".join(page.strip() for page in pages if page.strip())


# -- embeddings ----------------------------------------------------------------------------


def _hash_vector(*parts: object, dim: int) -> np.ndarray:
    """A stable pseudo-random vector in [-1, 1)^dim (SHA-256 in counter mode)."""
    needed = dim * 4
    base = media.seed_bytes(*parts)
    stream = b"".join(
        hashlib.sha256(base + counter.to_bytes(4, "big")).digest()
        for counter in range(-(-needed // 32))
    )
    raw = np.frombuffer(stream[:needed], dtype="<u4").astype(np.float64)
    return raw / 2**31 - 1.0


@lru_cache(maxsize=8192)
def _word_vector(seed: int, model_id: str, word: str, dim: int) -> np.ndarray:
    return _hash_vector(seed, "word", model_id, word, dim=dim)


def embed(seed: int, model_id: str, text: str, dim: int) -> np.ndarray:
    """The unit vector of ``text``: hashed bag of words plus a little per-text noise."""
    vector = 0.15 * _hash_vector(seed, "text", model_id, text, dim=dim)
    for word in _WORDS.findall(text.lower()):
        vector = vector + _word_vector(seed, model_id, word, dim)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
