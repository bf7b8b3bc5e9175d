"""A batch against the emulator's rate limit: ``concurrency="auto"`` learns it, pays each row
once (a 429 is free and never signed again), and shows what it learned."""

from __future__ import annotations

import httpx
from support.batch import CHEAP, transfers_per_key

from x402lab.batch import BatchSummary
from x402lab.batch.output._progress import BatchProgress, pace_text


def test_auto_learns_the_limit_and_pays_each_row_once(emulator_factory, lab_factory):
    emulator = emulator_factory(rate_limit_rpm=600, latency_s=0.02)  # 10 a second
    lab = lab_factory(emulator)
    seen: list[BatchProgress] = []
    frame = lab.batch_chat(
        [f"question {i}" for i in range(50)],
        model=CHEAP,
        max_tokens=16,
        progress=seen.append,
    )
    assert (frame["status"] == "ok").all()
    stats = httpx.get(f"{emulator.gateway_url}/api/x402/stats").json()
    # Every 429 the server sent went to this batch's requests, and each row settled once.
    summary = BatchSummary.of(frame)
    assert 1 <= summary.rate_limited == stats["limits"]["rateLimited"]
    assert stats["payments"]["settled"] == 50
    assert set(transfers_per_key(lab, emulator).values()) == {1}
    assert 5 < summary.rate_reached < 20
    assert "429s met" in repr(summary)
    paced = [p.pace for p in seen if p.pace is not None and p.pace.rate is not None]
    assert paced and "req/s" in pace_text(paced[-1]) and "in flight" in pace_text(paced[-1])


def test_a_fixed_concurrency_learns_nothing(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    frame = lab.batch_chat(["a", "b", "c"], model=CHEAP, max_tokens=16, concurrency=2)
    summary = BatchSummary.of(frame)
    assert (summary.rate_limited, summary.rate_reached) == (0, 0.0)
    assert "429s met" not in repr(summary)
