"""A fresh lab's batch learns its price while it fetches the catalog (``batch.prepare``):
two free probes, then every request paid with its first send, each row paid once."""

from __future__ import annotations

import httpx
import pytest
from support.batch import CHEAP, PRICEY, transfers_per_key

from x402lab.batch import BatchSummary
from x402lab.errors import ModelNotFound


def _stats(emulator) -> dict:
    return httpx.get(f"{emulator.gateway_url}/api/x402/stats").json()["payments"]


def test_a_fresh_batch_pays_every_request_with_its_first_send(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    rows = [f"question {i}" for i in range(40)]
    frame = lab.batch_chat(rows, model=CHEAP, max_tokens=16, concurrency=8, progress=None)
    assert (frame["status"] == "ok").all()
    stats = _stats(emulator)
    # The two probes are the batch's only 402s: the first wave already went paid.
    assert stats["challenges"] == 2
    assert stats["settled"] == 40
    assert BatchSummary.of(frame).prepay_hits == 40
    assert set(transfers_per_key(lab, emulator).values()) == {1}
    # A warm lab's next batch sends no probe: the price class is known.
    more = lab.batch_chat(
        [f"another {i}" for i in range(10)], model=CHEAP, max_tokens=16, progress=None
    )
    assert (more["status"] == "ok").all()
    assert _stats(emulator)["challenges"] == 2


def test_a_price_the_list_does_not_tell_is_not_waited_for(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    # Priced by their size, above the minimum: the probes confirm no class; rows pay as
    # before (a 402 each), and each row once.
    rows = [f"question {'x' * i}" for i in range(6)]
    frame = lab.batch_chat(rows, model=PRICEY, max_tokens=400, concurrency=8, progress=None)
    assert (frame["status"] == "ok").all()
    assert _stats(emulator)["settled"] == 6
    assert set(transfers_per_key(lab, emulator).values()) == {1}


def test_a_bad_model_is_refused_by_the_check_and_nothing_is_signed(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    with pytest.raises(ModelNotFound, match="did you mean"):
        lab.batch_chat(["a", "b", "c"], model=CHEAP + "x", max_tokens=16, progress=None)
    assert lab.ledger.to_pandas().empty
    assert _stats(emulator)["settled"] == 0
