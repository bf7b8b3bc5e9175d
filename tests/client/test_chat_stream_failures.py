"""A chat stream is sent once: after a failure, iterating it again raises the same error and
signs nothing new (docs/money.md, rule 4: never a new authorization for a request whose
outcome is unknown). Checked in the ledger and on the emulator's chain."""

from __future__ import annotations

import asyncio

import pytest
from support.client import CHAT_MODEL, settings

import x402lab as xl
from x402lab.emulator.settings import Faults


@pytest.fixture
def unlucky_lab(tmp_path):
    """A sync Lab whose gateway settles every payment and then answers 500."""
    lab = xl.connect(
        ledger=tmp_path / "ledger.sqlite",
        emulator_settings=settings(faults=Faults(paid_then_500_rate=1.0)),
    )
    yield lab
    lab.close()


def test_failed_stream_raises_its_error_again_and_signs_nothing_new(unlucky_lab):
    lab = unlucky_lab
    stream = lab.chat_stream("hello", model=CHAT_MODEL, max_tokens=8)
    with pytest.raises(xl.SettlementUnknown) as first:
        list(stream)
    with pytest.raises(xl.SettlementUnknown) as again:
        for _ in stream:
            pass
    assert again.value is first.value
    assert stream.done and stream.error is first.value
    # The same signed payload was sent again and answered "already used": the chain says it
    # settled once, and the answer is lost (never paid again).
    assert isinstance(first.value, xl.AnswerLost)
    assert "failed (AnswerLost)" in repr(stream)
    assert [row["status"] for row in lab.ledger.rows()] == ["settled"]
    assert len(lab.emulator.chain.transfers()) == 1


def test_failed_async_stream_keeps_its_error(tmp_path):
    async def main() -> tuple[list[BaseException], list[str], int]:
        async with xl.connect_async(
            ledger=tmp_path / "ledger.sqlite",
            emulator_settings=settings(faults=Faults(paid_then_500_rate=1.0)),
        ) as alab:
            stream = alab.chat_stream("hello", model=CHAT_MODEL, max_tokens=8)
            errors: list[BaseException] = []
            for _ in range(3):
                try:
                    async for _delta in stream:
                        pass
                except xl.SettlementUnknown as exc:
                    errors.append(exc)
            with pytest.raises(xl.SettlementUnknown):
                await stream.collect()
            assert alab.emulator is not None
            statuses = [row["status"] for row in alab.ledger.rows()]
            return errors, statuses, len(alab.emulator.chain.transfers())

    errors, statuses, transfers = asyncio.run(main())
    assert len(errors) == 3 and errors[0] is errors[1] is errors[2]
    assert isinstance(errors[0], xl.AnswerLost)
    assert statuses == ["settled"] and transfers == 1  # settled once, answer lost


def test_refused_stream_is_not_tried_again(tmp_path):
    lab = xl.connect(
        ledger=tmp_path / "ledger.sqlite",
        emulator_settings=settings(),
        budget=xl.Budget(usd=1.0, per_call_usd=0.000001),
    )
    try:
        stream = lab.chat_stream("hello", model=CHAT_MODEL, max_tokens=8)
        with pytest.raises(xl.PaymentRefused) as first:
            next(iter(stream))
        with pytest.raises(xl.PaymentRefused) as again:
            next(iter(stream))
        assert again.value is first.value
        assert [row["status"] for row in lab.ledger.rows()] == ["refused"]  # one, not two
        assert lab.emulator.chain.transfers() == []
    finally:
        lab.close()
