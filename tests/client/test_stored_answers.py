"""Every single paid call is a stored answer: the same request again pays nothing.

One lab on the embedded emulator, over real sockets: each call's transfers are counted on the
emulator's chain, each answer read back from the ledger (and, for binary answers, from its
file in the media folder).
"""

from __future__ import annotations

import os
import stat

import pytest
from support.client import CHAT_MODEL, EMBED_MODEL, TTS_MODEL

import x402lab as xl
from x402lab.gateway import chat_body
from x402lab.routes import CHAT


def test_the_same_call_twice_pays_once_and_says_it_is_stored(lab):
    chain = lab.emulator.chain

    def transfers() -> int:
        return len(chain.transfers())

    calls = {
        "chat": lambda **kw: lab.chat("Stored?", model=CHAT_MODEL, max_tokens=12, **kw),
        "search": lambda **kw: lab.search("one query", limit=3, **kw),
        "scrape": lambda **kw: lab.scrape("https://example.org/a", **kw),
        "embed": lambda **kw: lab.embed(["two", "texts"], model=EMBED_MODEL, **kw),
    }
    firsts = {}
    for name, call in calls.items():
        before = transfers()
        first, second = call(), call()
        assert transfers() == before + 1, name  # one transfer for the two calls
        assert not first.cached and second.cached, name
        assert second.cost.cached and second.cost.tx_hash == first.cost.tx_hash, name
        assert second.cost.amount_atomic == first.cost.amount_atomic > 0, name
        assert second.cost.ledger_id == first.cost.ledger_id, name
        assert second.cost.paid_at is not None and "stored answer" in str(second.cost)
        assert second.data == first.data, name
        assert second.paid_usd == 0 and first.paid_usd == first.cost.amount_usd, name
        firsts[name] = first
    assert (lab.embed(["two", "texts"], model=EMBED_MODEL).vectors == firsts["embed"].vectors).all()

    # rebuy=True pays again; a changed max_tokens is another request, paid.
    before = transfers()
    again = calls["chat"](rebuy=True)
    assert not again.cached and again.cost.tx_hash != firsts["chat"].cost.tx_hash
    longer = lab.chat("Stored?", model=CHAT_MODEL, max_tokens=13)
    assert not longer.cached and transfers() == before + 2
    # The newest answer is the stored one now; call() of the same body is the same request.
    by_path = lab.call("POST", CHAT, chat_body("Stored?", model=CHAT_MODEL, max_tokens=12))
    assert by_path.cached and by_path.cost.tx_hash == again.cost.tx_hash
    assert transfers() == before + 2

    # A JSON-RPC read is live unless asked: paid each time, or stored with reuse=True.
    before = transfers()
    live = [lab.rpc("base-mainnet", "eth_blockNumber") for _ in range(2)]
    assert [r.cached for r in live] == [False, False] and transfers() == before + 2
    kept = [lab.rpc("base-mainnet", "eth_chainId", reuse=True) for _ in range(2)]
    assert [r.cached for r in kept] == [False, True] and transfers() == before + 3
    assert kept[1].result == kept[0].result and kept[1].credits == kept[0].credits

    # Settled rows only, one per transfer: nothing was signed for a stored answer.
    rows = lab.ledger.rows()
    assert len(rows) == transfers() and {r["status"] for r in rows} == {"settled"}


def test_a_binary_answer_is_a_private_file_that_the_ledger_names(lab):
    chain = lab.emulator.chain
    first = lab.speech("Say it once", model=TTS_MODEL)
    second = lab.speech("Say it once", model=TTS_MODEL)
    assert len(chain.transfers()) == 1
    assert second.cached and second.bytes == first.bytes and len(first.bytes) > 100
    assert second.content_type == first.content_type
    [kept] = (lab.media_dir / "answers").iterdir()
    assert kept.read_bytes() == first.bytes
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    # A changed file is not given as the answer: the error says how to buy it again.
    kept.write_bytes(b"not the audio")
    with pytest.raises(xl.StoreError, match="rebuy=True"):
        lab.speech("Say it once", model=TTS_MODEL)
    os.unlink(kept)
    with pytest.raises(xl.StoreError, match="cannot be read"):
        lab.speech("Say it once", model=TTS_MODEL)
    assert len(chain.transfers()) == 1
    fresh = lab.speech("Say it once", model=TTS_MODEL, rebuy=True)
    assert not fresh.cached and kept.read_bytes() == fresh.bytes
    assert len(chain.transfers()) == 2


def test_a_stream_read_in_part_is_not_stored_and_is_not_paid_again_on_its_own(lab):
    stream = lab.chat_stream("A long story", model=CHAT_MODEL, max_tokens=60)
    next(iter(stream))
    stream.close()  # paid, not read whole: no stored answer, and it may not be bought again
    with pytest.raises(xl.SettlementUnknown, match="rebuy=True"):
        "".join(lab.chat_stream("A long story", model=CHAT_MODEL, max_tokens=60))
    whole = lab.chat_stream("A long story", model=CHAT_MODEL, max_tokens=60, rebuy=True)
    text = "".join(whole)
    again = lab.chat_stream("A long story", model=CHAT_MODEL, max_tokens=60)
    assert "".join(again) == text and again.cached and not whole.cached
    assert len(lab.emulator.chain.transfers()) == 2
