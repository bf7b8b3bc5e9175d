"""Ctrl+C, cancellation, ``rebuy`` and concurrent runs: each request key settles once.

No checkpoint anywhere: a batch claims every row in the ledger before paying and stores its
answer there, so the way to resume is to run the same call again.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.batch import CHEAP, transfers_per_key

import x402lab as xl
from x402lab._loop import run
from x402lab.batch.kinds._chat_codec import decode_json
from x402lab.errors import BatchInterrupted

PROMPTS = [f"interrupt me {i}" for i in range(50)]
RESUME = "To resume, run the same call again: settled rows are reused, nothing is paid twice."

CHILD = textwrap.dedent(
    """
    import json, sys
    import x402lab as xl

    gateway, reports, ledger, model, prompts = sys.argv[1:6]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_env(), ledger=ledger,
                     budget=xl.Budget(usd=5, name="interrupted"))

    def report(progress):
        print("done", progress.done, flush=True)

    frame = lab.batch_chat(json.loads(prompts), model=model, concurrency=4, progress=report)
    print("finished", json.dumps(frame["status"].value_counts().to_dict()), flush=True)
    """
)


def _child(tmp_path: Path, emulator: Any, key: str, prompts: list[str]) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    command = [
        sys.executable, str(script), emulator.gateway_url, emulator.reports_url,
        str(tmp_path / "ledger.sqlite"), CHEAP, json.dumps(prompts),
    ]  # fmt: skip
    env = {**os.environ, "X402LAB_PRIVATE_KEY": key}
    return subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A script started in a terminal has Python's Ctrl+C handler, even where pytest runs
        # as a background job (which inherits SIGINT ignored, and passes that on).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _signed_per_key(lab: Any) -> Counter[str]:
    """Authorizations signed per request key (ledger rows that carry a nonce)."""
    return Counter(row["request_key"] for row in lab.ledger.rows() if row["nonce"])


def _stored_answers(lab: Any, keys: list[str]) -> dict[str, str]:
    """The chat answers the ledger keeps for ``keys``."""
    records = lab.async_.batches.claims.get("batch:chat", keys)
    return {k: decode_json(r.answer)[0] for k, r in records.items() if r.answer is not None}


def _no_claim_left_pending(lab: Any) -> None:
    """The interrupted run gave back every claim it held: stored, unknown or free again."""
    records = lab.async_.batches.claims.all("batch:chat")
    assert records and "pending" not in {record.status for record in records}
    assert "done" in {record.status for record in records}


def _resume_and_check(lab: Any, emulator: Any, prompts: list[str]) -> Any:
    """Run the batch again without any checkpoint and check that nothing was paid twice."""
    paid_before = transfers_per_key(lab, emulator)
    keys = lab.estimate(prompts, model=CHEAP).rows["request_key"].tolist()  # free, unpaid
    stored = _stored_answers(lab, keys)
    frame = lab.batch_chat(prompts, model=CHEAP, concurrency=4, progress=None)
    counts = frame["status"].value_counts().to_dict()
    assert set(counts) <= {"ok", "cached", "paid_not_stored", "unknown"}
    assert counts.get("cached", 0) >= 1 and counts.get("ok", 0) >= 1
    per_key = transfers_per_key(lab, emulator)
    # No request key settled twice, and none was signed twice.
    assert max(per_key.values()) == 1 and max(_signed_per_key(lab).values()) == 1
    for row in frame.itertuples():
        if row.status in ("ok", "cached", "paid_not_stored"):
            assert per_key[row.request_key] == 1  # every row that shows a payment has one
        if row.status == "ok":
            assert paid_before[row.request_key] == 0  # bought now: not paid before
        else:
            # Nothing paid for it in this run: 0, or unknown (null: pd.NA in a decimal column).
            assert pd.isna(row.paid_usd) or row.paid_usd == 0
        if row.status == "cached":  # the stored answer of the interrupted run, as it was
            assert row.response == stored[row.request_key]
    assert stored and all(
        status == "cached" for status in frame.set_index("request_key").loc[list(stored), "status"]
    )
    # And a third run buys nothing at all.
    again = lab.batch_chat(prompts, model=CHEAP, concurrency=4, progress=None)
    assert "ok" not in set(again["status"]) and transfers_per_key(lab, emulator) == per_key
    return frame


def test_ctrl_c_ends_a_script_with_a_short_message_and_a_rerun_pays_nothing_twice(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(paid_latency_s=0.05)
    key = "0x" + secrets.token_hex(32)
    with _child(tmp_path, emulator, key, PROMPTS) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            for line in child.stdout:
                if line.startswith("done") and int(line.split()[1]) >= 10:
                    child.send_signal(signal.SIGINT)  # Ctrl+C in the terminal
                    break
            stdout, stderr = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 1  # an uncaught KeyboardInterrupt subclass: the script stops
    assert "finished" not in stdout
    # The short message, and no internal traceback (loop, runner, HTTP client frames).
    assert "BatchInterrupted: batch_chat interrupted: " in stderr
    message = stderr.strip().splitlines()[-1]
    assert " of 50 rows done, paid " in message and message.endswith(RESUME)
    for internal in ("x402lab/batch", "asyncio", "concurrent/futures", "httpx", "aiohttp",
                     "During handling", "CancelledError"):  # fmt: skip
        assert internal not in stderr, stderr
    assert len(stderr.strip().splitlines()) <= 10, stderr
    assert 10 <= len(emulator.chain.transfers()) < 50

    lab = lab_factory(emulator, key=key, ledger=tmp_path / "ledger.sqlite")
    _no_claim_left_pending(lab)
    _resume_and_check(lab, emulator, PROMPTS)


def test_a_cancelled_async_batch_says_how_to_resume_and_a_rerun_pays_nothing_twice(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(paid_latency_s=0.05)
    key = "0x" + secrets.token_hex(32)
    ledger = tmp_path / "ledger.sqlite"

    async def interrupted() -> tuple[BaseException, int]:
        lab = xl.connect_async(
            emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.from_key(key),
            ledger=ledger, budget=xl.Budget(usd=5, name="cancelled"),
        )  # fmt: skip
        done: list[int] = []
        report = lambda p: done.append(p.done)  # noqa: E731
        task = asyncio.create_task(
            lab.batch_chat(PROMPTS, model=CHEAP, concurrency=4, progress=report)
        )
        while not done or done[-1] < 10:
            await asyncio.sleep(0.01)
        task.cancel()  # what an interrupted notebook cell does to the batch
        try:
            await task
        except asyncio.CancelledError as exc:
            caught: BaseException = exc
        await lab.aclose()
        return caught, done[-1]

    caught, done = asyncio.run(interrupted())
    assert type(caught) is asyncio.CancelledError  # a cancelled task stays cancelled
    interrupt = caught.args[0]
    assert isinstance(interrupt, BatchInterrupted) and str(caught) == str(interrupt)
    assert interrupt.rows == 50 and interrupt.rows_done >= done >= 10
    # What this run paid: every row it finished, at most what moved on the chain.
    assert 10_000 * done <= interrupt.paid_atomic <= 10_000 * len(emulator.chain.transfers())
    assert str(interrupt).endswith(RESUME)

    lab = lab_factory(emulator, key=key, ledger=ledger)
    _no_claim_left_pending(lab)
    _resume_and_check(lab, emulator, PROMPTS)


def test_rebuy_pays_again_exactly_once_per_key(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    prompts = [f"buy twice {i}" for i in range(12)] + ["buy twice 0"]
    first = lab.batch_chat(prompts, model=CHEAP, concurrency=4, progress=None)
    assert first["status"].value_counts().to_dict() == {"ok": 12, "cached": 1}
    assert lab.estimate(prompts, model=CHEAP).total_atomic == 0
    assert lab.estimate(prompts, model=CHEAP, rebuy=True).total_atomic == 120_000

    again = lab.batch_chat(prompts, model=CHEAP, concurrency=4, rebuy=True, progress=None)
    assert again["status"].value_counts().to_dict() == {"ok": 12, "cached": 1}
    assert again.attrs["batch"]["paid_atomic"] == 120_000
    per_key = transfers_per_key(lab, emulator)
    assert set(first["request_key"]) == set(per_key) and set(per_key.values()) == {2}
    # What the rebuy bought is what later runs reuse.
    third = lab.batch_chat(prompts, model=CHEAP, progress=None)
    assert set(third["status"]) == {"cached"} and len(emulator.chain.transfers()) == 24
    assert (third["response"] == again["response"]).all()


def test_an_unknown_payment_is_reported_and_never_signed_again(emulator_factory, lab_factory):
    emulator = emulator_factory(paid_then_500_rate=0.5, seed=11)
    lab = lab_factory(emulator)
    prompts = [f"maybe paid {i}" for i in range(12)]
    with pytest.warns(xl.IncompleteBatchWarning, match="unknown"):
        first = lab.batch_chat(prompts, model=CHEAP, progress=None)
    unknown = first.loc[first["status"] == "unknown", "request_key"].tolist()
    assert unknown and set(first["status"]) == {"ok", "unknown"}
    signed = _signed_per_key(lab)

    transfers = len(emulator.chain.transfers())

    estimate = lab.estimate(prompts, model=CHEAP)
    by_key = estimate.rows.set_index("request_key")["status"]
    assert (by_key[unknown] == "unknown").all() and estimate.requests == 0
    for _ in range(2):
        with pytest.warns(xl.IncompleteBatchWarning, match="unknown|paid_not_stored"):
            frame = lab.batch_chat(prompts, model=CHEAP, progress=None)
        shown = frame.set_index("request_key")
        # Reported (unknown, or paid_not_stored once the ledger knows it settled), with why.
        assert shown.loc[unknown, "status"].isin(["unknown", "paid_not_stored"]).all()
        assert shown.loc[unknown, "error"].notna().all()
        assert not (frame["paid_usd"] > 0).any()
    # Never signed again: no new authorization for any key, nothing new on the chain.
    assert _signed_per_key(lab) == signed and max(signed.values()) == 1
    assert len(emulator.chain.transfers()) == transfers


def test_two_processes_running_the_same_batch_pay_each_key_once(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(paid_latency_s=0.03)
    key = "0x" + secrets.token_hex(32)
    prompts = [f"shared {i}" for i in range(40)] + ["shared 3"]
    children = [_child(tmp_path, emulator, key, prompts) for _ in range(2)]
    results = []
    for child in children:
        with child:
            stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr
        results.append(json.loads(stdout.splitlines()[-1].split(" ", 1)[1]))
    lab = lab_factory(emulator, key=key, ledger=tmp_path / "ledger.sqlite")
    per_key = transfers_per_key(lab, emulator)
    assert len(per_key) == 40 and set(per_key.values()) == {1}
    assert max(_signed_per_key(lab).values()) == 1
    # Each row was bought by one of the two runs; the other reused its stored answer.
    assert all(set(counts) <= {"ok", "cached"} for counts in results)
    assert sum(counts.get("ok", 0) for counts in results) == 40


def test_ctrl_c_in_another_sync_call_stays_a_plain_keyboard_interrupt():
    # Only a coroutine that ends with an interrupt of its own (a batch) changes what the sync
    # API raises; any other call cancelled by Ctrl+C raises the KeyboardInterrupt as before.
    # Python's own Ctrl+C handler, also where the shell that started pytest ignores SIGINT
    # (a background job of a non-interactive shell inherits SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            run(asyncio.sleep(30))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert type(caught.value) is KeyboardInterrupt


def test_a_claim_this_process_left_pending_is_given_back_not_waited_for(
    emulator_factory, lab_factory
):
    # A run of this process that could not give its claims back (its unwinding failed) must
    # not make every later run of the same process wait forever: no live run holds them.
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    prompts = ["left pending", "not claimed"]
    keys = lab.estimate(prompts, model=CHEAP).rows["request_key"].tolist()
    claims = lab.async_.batches.claims
    claims.claim("batch:chat", keys[:1])  # pending, owned by this process, held by no run
    frame = lab.batch_chat(prompts, model=CHEAP, progress=None)
    assert frame["status"].tolist() == ["ok", "ok"]
    assert set(transfers_per_key(lab, emulator).values()) == {1}
    history = [record.status for record in claims.history("batch:chat", keys[0])]
    assert history == ["failed", "done"]


def test_a_claim_another_lab_of_this_process_holds_is_waited_for(emulator_factory, lab_factory):
    # Each lab's batches hold their claims under an owner of their own (the registry of live
    # stores is the lab's): another lab of the same process on the same ledger waits for
    # them as for another process's, and never gives them back as if they were left.
    emulator = emulator_factory()
    holder, other = lab_factory(emulator), lab_factory(emulator)
    prompts = ["held by the other lab", "free"]
    keys = holder.estimate(prompts, model=CHEAP).rows["request_key"].tolist()
    claims = holder.async_.batches.claims
    claims.claim("batch:chat", keys[:1])  # pending: the holder is paying for it
    assert claims.owner != other.async_.batches.claims.owner
    timer = threading.Timer(1.0, claims.release, ("batch:chat", keys[:1], "the holder gave up"))
    timer.start()
    try:
        frame = other.batch_chat(prompts, model=CHEAP, progress=None)
    finally:
        timer.cancel()
    assert frame["status"].tolist() == ["ok", "ok"]
    [failed, done] = claims.history("batch:chat", keys[0])
    # Given back by its holder after the other lab waited, then bought once by the other lab.
    assert (failed.status, failed.error, done.status) == ("failed", "the holder gave up", "done")
    assert done.owner == other.async_.batches.claims.owner
    assert set(transfers_per_key(other, emulator).values()) == {1}
