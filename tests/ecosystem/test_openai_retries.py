"""openai-python's own retries through ``lab.openai()`` under the emulator's faults: a retry
of a paid request sends the same signed payment again, so each logical request settles at
most once (docs/money.md, rule 4) and every payment is a ledger row."""

from __future__ import annotations

import asyncio
from collections import Counter

import openai
import pytest

import x402lab as xl
from x402lab.errors import AnswerLost

CHAT_MODEL = "zai-org-glm-4.7-flash"
EMBED_MODEL = "text-embedding-3-small"


def _settled_per_key(lab, emulator) -> Counter[str]:
    """How many chain transfers each request key's payments made; every transfer's nonce
    must be a ledger row (no payment outside the ledger)."""
    rows = lab.ledger.rows()
    key_of = {row["nonce"]: row["request_key"] for row in rows if row["nonce"]}
    transfers = emulator.chain.transfers()
    assert {t.nonce for t in transfers} <= set(key_of), "a transfer with no ledger row"
    return Counter(key_of[t.nonce] for t in transfers)


def test_openai_default_retries_under_faults_settle_each_request_at_most_once(
    emulator_factory, lab_factory
):
    # 429 and 503 before any payment is read, and settled-then-500 answers (the ambiguous
    # case): openai-python retries them itself (max_retries=2, its default).
    emulator = emulator_factory(
        rate_429=0.15, retry_after_s=0.05, rate_5xx=0.2, paid_then_500_rate=0.3, seed=7
    )
    lab = lab_factory(emulator)
    outcomes: Counter[str] = Counter()
    with lab.openai() as client:
        assert client.max_retries == openai.DEFAULT_MAX_RETRIES
        for i in range(8):
            kind = ("chat", "stream", "embed")[i % 3]
            try:
                if kind == "chat":
                    client.chat.completions.create(
                        model=CHAT_MODEL,
                        messages=[{"role": "user", "content": f"question {i}"}],
                        max_tokens=8,
                    )
                elif kind == "stream":
                    chunks = client.chat.completions.create(
                        model=CHAT_MODEL,
                        messages=[{"role": "user", "content": f"streamed {i}"}],
                        max_tokens=8,
                        stream=True,
                    )
                    list(chunks)
                else:
                    client.embeddings.create(model=EMBED_MODEL, input=f"text {i}")
                outcomes["answered"] += 1
            except AnswerLost:
                outcomes["answer lost"] += 1  # settled once; its answer was lost
            except openai.APIStatusError as exc:
                outcomes[f"HTTP {exc.status_code}"] += 1  # retries used up
    settled = _settled_per_key(lab, emulator)
    assert settled and max(settled.values()) == 1, settled  # never two settlements per request
    rows = lab.ledger.rows()
    keys = {r["request_key"] for r in rows}
    assert len(keys) == 8  # each logical request has ledger rows under its own key
    answered_keys = {r["request_key"] for r in rows if r["status"] == "settled"}
    assert len(answered_keys) >= outcomes["answered"]
    assert outcomes["answered"] >= 1, outcomes


def test_a_settled_then_500_answer_is_retried_with_the_same_payment(emulator_factory, lab_factory):
    # Every paid request settles and then answers 500: openai-python retries, the retry
    # sends the same signed payload (the service says its nonce is used), and the caller
    # learns the answer was lost. One signature, one transfer.
    emulator = emulator_factory(paid_then_500_rate=1.0)
    lab = lab_factory(emulator)
    with lab.openai() as client, pytest.raises(AnswerLost, match="already used"):
        client.chat.completions.create(
            model=CHAT_MODEL, messages=[{"role": "user", "content": "lost"}], max_tokens=8
        )
    [row] = lab.ledger.rows()
    assert row["status"] in ("unknown", "settled")  # settled once the chain is read
    [transfer] = emulator.chain.transfers()
    assert transfer.nonce == row["nonce"]


def test_a_timeout_then_openai_retry_sends_the_same_payment(emulator_factory, lab_factory):
    # The paid request settles, then its answer takes longer than the client waits: the
    # row is left unknown and openai-python's retry sends the same signed payload again,
    # which the service reports as already used. One transfer, never a second signature.
    emulator = emulator_factory(paid_latency_s=1.5)
    lab = lab_factory(emulator)
    client = lab.openai(timeout=0.6)
    try:
        with pytest.raises((xl.SettlementUnknown, openai.APITimeoutError)):
            client.chat.completions.create(
                model=CHAT_MODEL, messages=[{"role": "user", "content": "slow"}], max_tokens=8
            )
    finally:
        client.close()
    asyncio.run(asyncio.sleep(1.6))  # let the emulator finish the settled request
    assert len(emulator.chain.transfers()) == 1
    rows = lab.ledger.rows()
    assert len({r["nonce"] for r in rows if r["nonce"]}) == 1
    assert len(rows) == 1 and rows[0]["status"] in ("unknown", "settled")
