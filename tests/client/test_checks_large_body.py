"""A body above aiohttp's large-body threshold goes out without any warning.

httpx-aiohttp hands aiohttp every request body as one bytes object, and aiohttp warns
("Sending a large body directly with raw bytes might lock the event loop") above
``aiohttp.payload.TOO_LARGE_BYTES_BODY``: the transport streams such bodies instead. pytest
runs with warnings as errors (pyproject.toml), so any warning fails these tests.
"""

from __future__ import annotations

import warnings

from aiohttp.payload import TOO_LARGE_BYTES_BODY

LARGE_CONTEXT_MODEL = "zai-org-glm-5-2"  # 1,000,000 tokens of context


def test_a_large_chat_prompt_is_sent_and_paid_without_a_warning(lab):
    prompt = "word " * (TOO_LARGE_BYTES_BODY // 4)  # 1.25 MiB, about 330,000 tokens
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # also outside pytest's own -W error
        result = lab.chat(prompt, model=LARGE_CONTEXT_MODEL, max_tokens=8)
    assert result.cost.status == "settled"
    # The whole body arrived (the emulator counts the prompt's tokens) and was paid once.
    assert result.prompt_tokens >= len(prompt) // 4
    assert len(lab.emulator.chain.transfers()) == 1
    (row,) = lab.ledger.rows()
    assert row["status"] == "settled"


def test_a_large_upload_is_sent_without_a_warning(lab):
    document = b"plain text\n" * (TOO_LARGE_BYTES_BODY // 10)  # a 1.1 MiB text file
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = lab.parse_document(document, filename="notes.txt")
    assert result.cost.status == "settled" and result.text
    assert len(lab.emulator.chain.transfers()) == 1
