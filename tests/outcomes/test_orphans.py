"""Rows left by a process that died: each signed row carries its owner (host, pid, start),
and ``connect()``, a claim and a later call of the same request key act on them at once
instead of waiting for the authorization's window to pass."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime

import pytest
from support.outcomes import (
    CHAT,
    CHAT_MODEL,
    chat_body,
    rows_of,
    spawn,
    transfers_by_nonce,
    wait_for,
)

from x402lab.ledger import (
    EXPIRY_SLACK_S,
    ClaimAction,
    Claims,
    Ledger,
    owner_alive,
    owner_gone,
    process_owner,
)


def _dead_owner() -> str:
    """The owner string of a process of this host that has exited."""
    code = "from x402lab.ledger import process_owner; print(process_owner())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_an_owner_is_alive_while_its_process_runs():
    me = process_owner()
    assert owner_alive(me) is True and not owner_gone(me)
    dead = _dead_owner()
    assert owner_alive(dead) is False and owner_gone(dead)
    host, pid, start = me.rsplit(":", 2)
    assert owner_alive(f"{host}:{pid}:{int(start) - 1000}") is False  # a reused pid
    assert owner_alive(f"elsewhere:{pid}:{start}") is None  # another host: cannot tell
    assert not owner_gone(f"elsewhere:{pid}:{start}")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_is_its_own_owner():
    parent = process_owner()  # kept by the parent, as every paid call asks for it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its owner and leave at once
        os.write(write, process_owner().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 1000).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child.split(":")[1] == str(pid) and child != parent
    assert process_owner() == parent


def test_a_pending_claim_of_a_dead_process_is_taken_over_at_once(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    dead = Claims(ledger.db, owner=_dead_owner())
    dead.claim("batch:chat", ["k"])
    live = Claims(ledger.db, owner="elsewhere:7:1")
    live.claim("batch:chat", ["other"])
    me = Claims(ledger.db)  # the stale age (300 s) has not passed for either
    assert me.claim("batch:chat", ["k"])["k"].action is ClaimAction.PAY
    assert me.claim("batch:chat", ["other"])["other"].action is ClaimAction.WAIT


def test_a_row_signed_by_a_process_that_died_unsent_is_sent_by_the_next_call(
    start, lab_for, ledger_path
):
    emulator = start()
    child = spawn("sign_and_die", emulator.gateway_url, str(ledger_path), "Signed, then died")
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    signed = json.loads(out.splitlines()[-1])
    [row] = rows_of(ledger_path)
    assert row["status"] == "signed" and row["nonce"] == signed["nonce"]

    # connect(): the sender is gone; the chain says unused and still valid, and the ledger
    # holds its payload, so it stays signed for whoever sends it again (never unknown).
    lab = lab_for(emulator)
    [row] = lab.ledger.rows()
    assert row["status"] == "signed"
    assert emulator.chain.transfers() == []
    state = lab.budget.state()
    assert state.in_flight_atomic == row["amount_atomic"]

    # The same request again sends that stored payload: no new signature, one transfer.
    result = lab.call("POST", CHAT, chat_body("Signed, then died"))
    assert result.cost.status == "settled"
    [row] = lab.ledger.rows()
    assert row["status"] == "settled" and row["nonce"] == signed["nonce"]
    assert row["resolved_by"] == "resend"
    [transfer] = emulator.chain.transfers()
    assert transfer.nonce.lower() == signed["nonce"].lower()
    assert transfer.tx_hash == row["tx_hash"] == result.cost.tx_hash


def test_a_resumed_batch_sends_the_payload_a_killed_process_signed(start, lab_for, ledger_path):
    emulator = start()
    prompt = "Batch row, signed, then died"
    child = spawn("claim_sign_and_die", emulator.gateway_url, str(ledger_path), prompt)
    out, _ = child.communicate(timeout=60)
    signed = json.loads(out.splitlines()[-1])
    lab = lab_for(emulator)
    # The dead run's pending claim is taken over at once (its owner is gone, not stale yet),
    # and its key is paid by sending the payload it signed: no new signature.
    frame = lab.batch_chat([prompt, "A fresh row"], model=CHAT_MODEL, max_tokens=8)
    assert frame["status"].tolist() == ["ok", "ok"]
    rows = {r["nonce"]: r for r in lab.ledger.rows()}
    assert len(rows) == 2 and rows[signed["nonce"]]["status"] == "settled"
    assert rows[signed["nonce"]]["resolved_by"] == "resend"
    assert set(transfers_by_nonce(emulator)) == {n.lower() for n in rows}
    again = lab.batch_chat([prompt], model=CHAT_MODEL, max_tokens=8)
    assert again["status"].tolist() == ["cached"]  # its answer was stored


def test_a_payment_a_killed_process_signed_is_sent_whoever_connects_first(
    start, lab_for, ledger_path
):
    emulator = start()
    prompt = "Batch row of a killed analyst"
    child = spawn("claim_sign_and_die", emulator.gateway_url, str(ledger_path), prompt)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    signed = json.loads(out.splitlines()[-1])

    # The lead connects first, in another process, with the chain known, and reconciles:
    # the row can still settle and its payload is kept, so it is left signed (not unknown),
    # and reconcile() lists it, open, with when it could be freed (slack included).
    lead = spawn("look_and_reconcile", emulator.gateway_url, str(ledger_path), emulator.chain_url)
    looked, err = lead.communicate(timeout=120)
    assert lead.returncode == 0, err
    seen = json.loads(looked.splitlines()[-1])
    assert seen["statuses"] == {str(signed["row"]): "signed"}
    [listed] = seen["listed"]
    assert (listed["id"], listed["before"], listed["after"]) == (
        str(signed["row"]),
        "signed",
        "signed",
    )
    expires, frees = (datetime.fromisoformat(listed[k]) for k in ("expires_at", "frees_at"))
    assert (frees - expires).total_seconds() == EXPIRY_SLACK_S
    assert seen["attrs"]["still_open"] == 1 and seen["attrs"]["checked"] == 1
    assert datetime.fromisoformat(seen["attrs"]["next_free"]) == frees
    assert emulator.chain.transfers() == []

    # The analyst restarts and runs the batch again: the same payload is sent, it settles.
    lab = lab_for(emulator)
    frame = lab.batch_chat([prompt], model=CHAT_MODEL, max_tokens=8)
    assert frame["status"].tolist() == ["ok"]
    [row] = lab.ledger.rows()
    assert (row["status"], row["resolved_by"]) == ("settled", "resend")
    assert set(transfers_by_nonce(emulator)) == {signed["nonce"].lower()}


def test_connect_reconciles_a_row_a_killed_process_left_in_flight(start, lab_for, ledger_path):
    # The server settles the paid request and holds its answer; the process is killed while
    # it waits. The next connect() finds the row's sender gone and asks the chain.
    emulator = start(paid_latency_s=5.0)
    child = spawn("pay_slowly", emulator.gateway_url, str(ledger_path), "Killed in flight")
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    [transfer] = wait_for(lambda: emulator.chain.transfers())
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=10)
    [row] = rows_of(ledger_path)
    assert row["status"] == "signed"  # left in flight

    lab = lab_for(emulator)
    [row] = lab.ledger.rows()
    assert row["status"] == "settled" and row["resolved_by"] == "chain"
    assert row["tx_hash"] == transfer.tx_hash
    assert set(transfers_by_nonce(emulator)) == {row["nonce"].lower()}
    assert lab.budget.state().settled_atomic == transfer.amount_atomic


def test_connect_without_a_chain_leaves_the_orphan_signed_and_counted(start, lab_for, ledger_path):
    emulator = start()
    child = spawn("sign_and_die", emulator.gateway_url, str(ledger_path), "Orphan, no chain")
    child.communicate(timeout=60)
    lab = lab_for(emulator, chain=False)
    [row] = lab.ledger.rows()
    assert row["status"] == "signed"  # still valid, its payload kept: sent by the next call
    assert lab.budget.state().in_flight_atomic == row["amount_atomic"]
