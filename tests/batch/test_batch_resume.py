"""Resume from the ledger: a killed run, a paid-then-500 row and a re-run never pay twice.

No checkpoint of any kind: every row is claimed in the ledger before it is paid and its answer
stored there, so running the same call again is the way to resume.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import warnings
from collections import Counter

import pytest
from support.batch import CHEAP, chain_atomic, settled_atomic, transfers_per_key

import x402lab as xl

CHILD = textwrap.dedent(
    """
    import sys
    import x402lab as xl

    gateway, reports, ledger, model = sys.argv[1:5]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_env(), ledger=ledger,
                     budget=xl.Budget(usd=50))

    def report(progress):
        print("done", progress.done, flush=True)

    lab.batch_chat([f"question number {i}" for i in range(200)], model=model,
                   concurrency=8, progress=report)
    print("finished", flush=True)
    """
)


def test_killed_run_resumed_pays_nothing_twice(emulator_factory, lab_factory, tmp_path):
    emulator = emulator_factory(paid_latency_s=0.03)
    key = "0x" + secrets.token_hex(32)
    ledger = tmp_path / "ledger.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    command = [
        sys.executable,
        str(script),
        emulator.gateway_url,
        emulator.reports_url,
        str(ledger),
        CHEAP,
    ]
    env = {**os.environ, "X402LAB_PRIVATE_KEY": key}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("done") and int(line.split()[1]) >= 40:
                    os.kill(child.pid, signal.SIGKILL)  # mid-batch, no clean-up of any kind
                    break
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                child.wait()
    assert child.returncode == -signal.SIGKILL
    paid_before = len(emulator.chain.transfers())
    assert 40 <= paid_before < 200

    lab = lab_factory(emulator, key=key, ledger=ledger)
    # The killed run left its in-flight claims pending: they are waited for until they are
    # stale (a second here, a minute by default), then taken over.
    lab.async_.batches.claims.stale_after_s = 1.0
    prompts = [f"question number {i}" for i in range(200)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = lab.batch_chat(prompts, model=CHEAP, concurrency=8, progress=None)
    counts = frame["status"].value_counts().to_dict()
    assert set(counts) <= {"ok", "cached", "paid_not_stored", "unknown"}
    # The run says it is incomplete exactly when the kill left rows paid without an answer
    # (a kill between two requests leaves none).
    incomplete = [w for w in caught if issubclass(w.category, xl.IncompleteBatchWarning)]
    unanswered = counts.get("paid_not_stored", 0) + counts.get("unknown", 0)
    assert len(incomplete) == (1 if unanswered else 0), [str(w.message) for w in caught]
    # Every row the killed run had emitted was paid: its answer stored, or (if the kill came
    # first) reported as paid but not stored.
    assert counts["cached"] >= 1 and counts["ok"] >= 1
    assert counts["cached"] + counts.get("paid_not_stored", 0) >= 40
    per_key = transfers_per_key(lab, emulator)
    assert max(per_key.values()) == 1  # no request was paid twice
    for status in ("ok", "cached", "paid_not_stored"):
        keys = frame.loc[frame["status"] == status, "request_key"]
        assert all(per_key[k] == 1 for k in keys)
    # Rows the killed run had sent without an answer are 'unknown', never bought again.
    counting = ("signed", "settled", "unknown")
    ledger_rows = Counter(r["request_key"] for r in lab.ledger.rows() if r["status"] in counting)
    assert max(ledger_rows.values()) == 1
    assert frame.attrs["batch"]["paid_atomic"] == 10_000 * counts["ok"]

    # A third run buys nothing at all.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = lab.batch_chat(prompts, model=CHEAP, concurrency=8, progress=None)
    incomplete = [w for w in caught if issubclass(w.category, xl.IncompleteBatchWarning)]
    assert len(incomplete) == (1 if unanswered else 0), [str(w.message) for w in caught]
    assert "ok" not in set(again["status"])
    assert len(emulator.chain.transfers()) == sum(per_key.values())
    assert (again["response"].fillna("") == frame["response"].fillna("")).all()


def test_paid_then_500_row_is_not_paid_again(emulator_factory, lab_factory, tmp_path):
    emulator = emulator_factory(paid_then_500_rate=0.5, seed=3)
    lab = lab_factory(emulator)
    prompts = [f"item {i}" for i in range(16)]
    with pytest.warns(xl.IncompleteBatchWarning, match=r"\d+ unknown \(0\.\d\d USD at risk"):
        first = lab.batch_chat(prompts, model=CHEAP, progress=None)
    unknown = first[first["status"] == "unknown"]
    assert set(first["status"]) == {"ok", "unknown"} and len(unknown) >= 1
    assert unknown["paid_usd"].isna().all() and unknown["quoted_usd"].eq(0.01).all()
    # The emulator did settle them: the money moved though no receipt came back.
    assert len(emulator.chain.transfers()) == 16
    assert first.attrs["batch"]["unknown_atomic"] == 10_000 * len(unknown)
    signed_before = {(r["id"], r["request_key"], r["nonce"]) for r in lab.ledger.rows()}

    with pytest.warns(xl.IncompleteBatchWarning, match="unknown|paid_not_stored"):
        second = lab.batch_chat(prompts, model=CHEAP, progress=None)
    # Nothing new was signed or settled: the same ledger rows and nonces (a row's status may
    # move once its outcome is known), and the same transfers on the chain.
    assert {(r["id"], r["request_key"], r["nonce"]) for r in lab.ledger.rows()} == signed_before
    assert len(emulator.chain.transfers()) == 16
    again = second.set_index("request_key")["status"]
    assert again[unknown["request_key"]].isin(["unknown", "paid_not_stored"]).all()
    assert set(second["status"]) <= {"cached", "unknown", "paid_not_stored"}
    assert (second["status"] == "cached").sum() == 16 - len(unknown)
    assert not (second["paid_usd"] > 0).any()


def test_rerun_with_a_bigger_budget_buys_only_what_is_missing(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory()
    ledger = tmp_path / "ledger.sqlite"
    prompts = [f"fact {i}" for i in range(12)]
    small = lab_factory(emulator, usd=0.05, ledger=ledger)
    with pytest.raises(xl.BudgetExceeded, match="0.12 USD .* 0.05 USD left"):
        small.batch_chat(prompts, model=CHEAP, concurrency=1, progress=None)
    assert chain_atomic(emulator) == 0  # refused before anything was signed
    with pytest.warns(xl.IncompleteBatchWarning, match="7 skipped_budget"):
        first = small.batch_chat(prompts, model=CHEAP, concurrency=1, progress=None, partial=True)
    assert first["status"].value_counts().to_dict() == {"ok": 5, "skipped_budget": 7}
    skipped = first["status"] == "skipped_budget"
    assert first.loc[skipped, "cost_usd"].isna().all()  # nothing was paid for them
    assert first.loc[~skipped, "cost_usd"].tolist() == first.loc[~skipped, "paid_usd"].tolist()
    estimate = small.estimate(prompts, model=CHEAP)
    assert (
        estimate.total_atomic == 70_000 and estimate.rows["status"].tolist()[:5] == ["cached"] * 5
    )

    bigger = lab_factory(emulator, usd=1.0, ledger=ledger)
    second = bigger.batch_chat(prompts, model=CHEAP, progress=None)
    assert second["status"].tolist() == ["cached"] * 5 + ["ok"] * 7
    assert settled_atomic(bigger) == chain_atomic(emulator) == 120_000
    assert second.attrs["batch"]["paid_atomic"] == 70_000
    assert second.attrs["batch"]["cached_atomic"] == 50_000
    assert (second["response"].iloc[:5] == first["response"].iloc[:5]).all()


def test_cancelled_batch_keeps_what_arrived(emulator_factory, tmp_path):
    emulator = emulator_factory(paid_latency_s=0.05)
    prompts = [f"line {i}" for i in range(60)]

    async def main() -> tuple[list[int], object]:
        lab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.create(),
            ledger=tmp_path / "ledger.sqlite",
        )
        done: list[int] = []
        args = dict(model=CHEAP, concurrency=4)
        task = asyncio.create_task(
            lab.batch_chat(prompts, progress=lambda p: done.append(p.done), **args)
        )
        while not done or done[-1] < 8:
            await asyncio.sleep(0.01)
        task.cancel()  # what an interrupted notebook cell does to the batch
        with pytest.raises(asyncio.CancelledError):
            await task
        again = await lab.batch_chat(prompts, progress=None, **args)
        rows = lab.ledger.rows()
        await lab.aclose()
        return done, (again, rows)

    done, (again, rows) = asyncio.run(main())
    counts = again["status"].value_counts().to_dict()
    assert counts["cached"] >= done[-1] >= 8
    # A request cancelled after its receipt was read but before its body arrived is settled
    # and not stored: the re-run says so (paid_not_stored) instead of buying it again.
    assert set(counts) <= {"cached", "ok", "unknown", "paid_not_stored"}
    keys = Counter(r["request_key"] for r in rows if r["status"] in ("settled", "unknown"))
    assert max(keys.values()) == 1
    nonces = {r["nonce"] for r in rows if r["nonce"]}
    assert len(emulator.chain.transfers()) <= len(nonces)
    assert {t.nonce for t in emulator.chain.transfers()} <= nonces


def test_checkpoint_is_gone_with_a_note_on_how_to_resume(emulator, lab_factory, tmp_path):
    lab = lab_factory(emulator)
    for call in (lab.batch_chat, lab.estimate):
        with pytest.raises(TypeError, match="resume from the ledger by default"):
            call(["one"], model=CHEAP, checkpoint=tmp_path / "chat.ckpt")
    with pytest.raises(TypeError, match="run the same call again|Run the same call again"):
        lab.batch_embed(["one"], model="text-embedding-3-small", checkpoint="x.ckpt")
    assert lab.ledger.rows() == []
