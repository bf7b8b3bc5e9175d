"""While a batch runs, the collector skips the objects the process had before it
(``batch.heap``): they are set aside for the run and handed back when the last run ends,
also when runs overlap or one fails; objects the process froze itself stay frozen."""

from __future__ import annotations

import asyncio
import gc
import secrets

import pytest
from batch_testdata import CHEAP

import x402lab as xl
from x402lab.batch.heap import frozen_heap


def test_old_objects_are_set_aside_during_a_run_and_handed_back_after(emulator, tmp_path):
    assert gc.get_freeze_count() == 0
    seen: list[int] = []

    async def run() -> None:
        lab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)),
            budget=xl.Budget(usd=5.0),
            ledger=tmp_path / "ledger.sqlite",
        )
        try:
            prompts = [f"heap question {i}" for i in range(40)]
            batch = asyncio.create_task(
                lab.batch_chat(prompts, model=CHEAP, max_tokens=8, concurrency=8, progress=None)
            )
            while not batch.done():
                seen.append(gc.get_freeze_count())
                await asyncio.sleep(0.001)
            frame = await batch
            assert (frame["status"] == "ok").all()
        finally:
            await lab.aclose()

    asyncio.run(run())
    assert max(seen) > 1000  # the interpreter's modules and more were set aside
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_hand_back_when_the_last_ends_even_after_a_failure():
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with pytest.raises(RuntimeError), frozen_heap():
            raise RuntimeError("a run that fails")
        assert gc.get_freeze_count() >= frozen  # the outer run still holds them
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_is_left_as_it_is():
    gc.freeze()
    try:
        theirs = gc.get_freeze_count()
        with frozen_heap():
            assert gc.get_freeze_count() == theirs
        assert gc.get_freeze_count() == theirs  # not handed back: they are not ours
    finally:
        gc.unfreeze()
