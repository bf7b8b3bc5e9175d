"""Ctrl+C drains a batch: the first interrupt lets the requests on the wire finish and stores
their answers, a second one stops at once. Real processes, real SIGINTs, the emulator holding
each paid answer back after its receipt (``answer_delay_s``) so requests are in flight; once the
interrupted child has ended, ``release_answers()`` ends the hold and the re-runs buy at speed."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support.batch import CHEAP, transfers_per_key

import x402lab as xl

LABELS = ["positive", "negative", "neutral"]
ROWS = 120
PACK = 5  # rows per paid request: 24 packs, 4 at a time
CHILD = textwrap.dedent(
    """
    import json, sys
    import pandas as pd
    import x402lab as xl

    gateway, reports, ledger, model, rows, pack = sys.argv[1:7]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_env(), ledger=ledger,
                     budget=xl.Budget(usd=5, name="drained"))

    def report(progress):
        if progress.stopping is not None:
            print("stopping", progress.stopping, flush=True)
        else:
            print("done", progress.done, flush=True)

    reviews = pd.DataFrame({"review": [f"review number {i}" for i in range(int(rows))]})
    frame = lab.batch_chat(reviews, prompt="Sentiment: {review}", model=model,
                           labels=json.loads(sys.argv[7]), rows_per_request=int(pack),
                           concurrency=4, progress=report)
    print("finished", flush=True)
    """
)


def _reviews() -> Any:
    import pandas as pd

    return pd.DataFrame({"review": [f"review number {i}" for i in range(ROWS)]})


def _start(tmp_path: Path, emulator: Any, key: str) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    command = [
        sys.executable, str(script), emulator.gateway_url, emulator.reports_url,
        str(tmp_path / "ledger.sqlite"), CHEAP, str(ROWS), str(PACK), json.dumps(LABELS),
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        env={**os.environ, "X402LAB_PRIVATE_KEY": key},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Python's own Ctrl+C handler, also where pytest runs as a background job (which
        # inherits SIGINT ignored and passes that on).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for(child: subprocess.Popen[str], word: str, at_least: int = 0) -> None:
    assert child.stdout is not None
    for line in child.stdout:
        parts = line.split()
        if parts and parts[0] == word and int(parts[1]) >= at_least:
            return
    pytest.fail(f"the child ended before printing {word!r}: {child.stderr.read()}")  # type: ignore[union-attr]


def _rerun(lab: Any) -> Any:
    return lab.batch_chat(
        _reviews(), prompt="Sentiment: {review}", model=CHEAP, labels=LABELS,
        rows_per_request=PACK, concurrency=4, progress=None,
    )  # fmt: skip


def test_first_ctrl_c_drains_and_a_rerun_leaves_no_paid_row_unstored(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(answer_delay_s=1.0)
    key = "0x" + secrets.token_hex(32)
    with _start(tmp_path, emulator, key) as child:
        try:
            _wait_for(child, "done", at_least=PACK)  # one pack answered, more on the wire
            child.send_signal(signal.SIGINT)
            stdout, stderr = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 1 and "finished" not in stdout, stderr
    assert "stopping" in stdout  # the bar said it was letting requests finish
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("x402lab.errors.BatchInterrupted: batch_chat interrupted: ")
    assert (
        re.search(r"\d+ requests? in flight at the stop: ", message)
        and "answered and stored" in message
    )
    assert "x402lab/batch" not in stderr and len(stderr.strip().splitlines()) <= 10, stderr
    emulator.release_answers()
    paid_then = len(emulator.chain.transfers())
    assert 2 <= paid_then < ROWS // PACK

    lab = lab_factory(emulator, key=key, ledger=tmp_path / "ledger.sqlite")
    # Every pack that was paid has its answers stored: nothing paid is reported lost.
    estimate = lab.estimate(
        _reviews(), prompt="Sentiment: {review}", model=CHEAP, labels=LABELS,
        rows_per_request=PACK,
    )  # fmt: skip
    assert set(estimate.rows["status"]) == {"cached", "quoted"}
    assert (estimate.rows["status"] == "cached").sum() == paid_then * PACK
    frame = _rerun(lab)
    counts = frame["status"].value_counts().to_dict()
    assert counts == {"cached": paid_then * PACK, "ok": ROWS - paid_then * PACK}
    assert "paid_not_stored" not in counts
    # Exactly one transfer per pack, across the interrupted run and the re-run.
    per_key = transfers_per_key(lab, emulator)
    assert len(emulator.chain.transfers()) == ROWS // PACK == len(per_key)
    assert set(per_key.values()) == {1} and set(per_key) == set(frame["request_key"])


def test_a_second_ctrl_c_stops_at_once(emulator_factory, lab_factory, tmp_path):
    delay = 8.0
    emulator = emulator_factory(answer_delay_s=delay)
    key = "0x" + secrets.token_hex(32)
    with _start(tmp_path, emulator, key) as child:
        try:
            while len(emulator.chain.transfers()) < 1:  # a payment settled, its answer held
                assert child.poll() is None, child.communicate()
                time.sleep(0.05)
            child.send_signal(signal.SIGINT)
            _wait_for(child, "stopping", at_least=1)  # draining: waiting for the answers
            stopped = time.monotonic()
            child.send_signal(signal.SIGINT)
            stdout, stderr = child.communicate(timeout=30)
            took = time.monotonic() - stopped
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 1 and "finished" not in stdout
    assert took < delay / 2, took  # did not wait for the held answers
    message = stderr.strip().splitlines()[-1]
    assert "BatchInterrupted: batch_chat interrupted: " in message
    assert "stopped at once (second interrupt)" in message and 'rebuy="lost"' in message
    emulator.release_answers()

    # Those payments settled without a stored answer: reported, never bought on their own.
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.from_key(key),
        ledger=tmp_path / "ledger.sqlite", chain_rpc_url=emulator.chain_url,
    )  # fmt: skip
    lab.reconcile()  # the chain says which of the interrupted payments settled
    paid = len(emulator.chain.transfers())
    with pytest.warns(xl.IncompleteBatchWarning, match="paid_not_stored"):
        frame = _rerun(lab)
    lost = frame["status"] == "paid_not_stored"
    assert lost.sum() == paid * PACK
    assert len(emulator.chain.transfers()) == ROWS // PACK  # the rest bought, the lost not
    # rebuy="lost" buys exactly those packs again, and nothing else.
    again = lab.batch_chat(
        _reviews(), prompt="Sentiment: {review}", model=CHEAP, labels=LABELS,
        rows_per_request=PACK, concurrency=4, progress=None, rebuy="lost",
    )  # fmt: skip
    assert (again.loc[lost, "status"] == "ok").all() and (
        again.loc[~lost, "status"] == "cached"
    ).all()
    assert len(emulator.chain.transfers()) == ROWS // PACK + paid
    lab.close()
