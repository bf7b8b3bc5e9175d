"""A media queue or a report purchase killed with SIGKILL right after its payment settled keeps
its answer: the job (queue id) and the bought reports are committed in the same transaction as
the settlement (``Reply.settlement``, ``Settlement`` in ``x402lab/ledger/payments.py``), so the
re-run gets them without paying again.

The emulator sends a settled answer's headers (its receipt) at once and its body
``answer_delay_s`` later (``Faults.answer_delay_s``); the process is killed as soon as the
ledger shows the first payment settled. Were the settlement committed on its own when the
receipt arrived, the kill would land while the body is on its way, and the re-run would find a
payment without its answer. Only the request on the wire at the kill (the second one) may
be lost, never paid twice.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

import x402lab as xl
from x402lab.errors import X402LabError

KEY = "0x" + "5b" * 32
ANSWER_DELAY_S = 0.6
MUSIC = {"model": "ace-step-15", "duration_seconds": 60}
PROMPTS = ("rain on a tin roof", "wind in tall grass")
HANDLES = ("solarmoth", "quantquill")
ASKS = {"music": [{"prompt": p, **MUSIC} for p in PROMPTS], "reports": list(HANDLES)}

WORKER = textwrap.dedent(
    """
    import json, sys, time
    import x402lab as xl
    gateway, reports, ledger, key, kind, asks = sys.argv[1:7]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_key(key), ledger=ledger)
    for ask in json.loads(asks):
        if kind == "music":
            lab.music(**ask)
        else:
            lab.reports.buy(ask)
    time.sleep(60)  # killed before this ends
    """
)


def _settled(ledger_path: Path) -> int:
    if not ledger_path.exists():
        return 0
    db = sqlite3.connect(ledger_path, timeout=5)
    try:
        found = db.execute("SELECT COUNT(*) FROM payments WHERE status = 'settled'").fetchone()
        return int(found[0])
    except sqlite3.OperationalError:  # the schema is not created yet
        return 0
    finally:
        db.close()


@pytest.fixture
def delayed(emulator_factory):
    """An emulator whose settled answers' bodies come ``ANSWER_DELAY_S`` after the receipt."""
    return emulator_factory(answer_delay_s=ANSWER_DELAY_S)


def _lab(emulator, ledger_path: Path):
    return xl.connect(
        emulator.gateway_url,
        emulator.reports_url,
        wallet=xl.Wallet.from_key(KEY),
        ledger=ledger_path,
    )


def _kill_after_first_settlement(kill_when, emulator, ledger_path: Path, kind: str) -> None:
    kill_when(
        WORKER,
        [emulator.gateway_url, emulator.reports_url, str(ledger_path), KEY, kind,
         json.dumps(ASKS[kind])],
        lambda: _settled(ledger_path) >= 1,
        "the first payment's settlement",
    )  # fmt: skip


def test_a_media_queue_killed_after_its_settlement_keeps_its_job(delayed, tmp_path, kill_when):
    ledger_path = tmp_path / "ledger.sqlite"
    _kill_after_first_settlement(kill_when, delayed, ledger_path, "music")
    paid_at_kill = len(delayed.chain.transfers())
    lab = _lab(delayed, ledger_path)
    try:
        job = lab.music(PROMPTS[0], **MUSIC)  # the stored job: nothing is paid
        assert job.queue_id
        assert len(delayed.chain.transfers()) == paid_at_kill
        try:  # the request on the wire at the kill: paid once at most, or reported
            lab.music(PROMPTS[1], **MUSIC)
        except X402LabError:
            pass
        assert len(delayed.chain.transfers()) <= 2
        assert [j.queue_id for j in lab.async_.media.job_store.all()][0] == job.queue_id
    finally:
        lab.close()


def test_a_report_purchase_killed_after_its_settlement_keeps_its_reports(
    delayed, tmp_path, kill_when
):
    ledger_path = tmp_path / "ledger.sqlite"
    _kill_after_first_settlement(kill_when, delayed, ledger_path, "reports")
    paid_at_kill = len(delayed.chain.transfers())
    lab = _lab(delayed, ledger_path)
    try:
        again = lab.reports.buy(HANDLES[0])  # every report owned: no paid request
        assert again.paid_atomic == 0
        assert again.reports and all(report.owned_before for report in again.reports)
        assert len(delayed.chain.transfers()) == paid_at_kill
        try:  # the purchase on the wire at the kill: paid once at most, or reported
            lab.reports.buy(HANDLES[1])
        except X402LabError:
            pass
        assert len(delayed.chain.transfers()) <= 2
    finally:
        lab.close()
