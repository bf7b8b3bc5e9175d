"""The embedded world lasts as long as its ledger: a second process continues the first's.

Two real Python processes, one after the other, each ``connect(ledger=path)`` with no
address (the embedded emulator), run the same notebook-like cells: a chat, a search, every
report of a handle, a music job's media and a 6-row batch. The second has the same wallet
and chain, adds no payment, gets the same bytes and owns what the first bought. Both run
under umask 022: the world's folder and files are private all the same.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import x402lab as xl

_CELLS = """
import hashlib, json, os, sys
os.umask(0o022)
import x402lab as xl
from x402lab.emulator import EmulatorSettings
lab = xl.connect(ledger=sys.argv[1], emulator_settings=EmulatorSettings(job_seconds=0.3))
chain = lab.emulator.chain
before = len(chain.transfers())
chat = lab.chat("Hello again", model="zai-org-glm-4.7-flash", max_tokens=12)
search = lab.search("the same query", limit=2)
reports = lab.reports.buy("solarmoth", select="all")
job = lab.music("a calm piano loop", model="ace-step-15", duration_seconds=60)
polls_before = job.polls
audio = job.result()
frame = lab.batch_chat([f"row {i}" for i in range(6)], model="zai-org-glm-4.7-flash", max_tokens=8)
rows = lab.ledger.rows()
print(json.dumps({
    "wallet": lab.wallet.address,
    "transfers": [before, len(chain.transfers())],
    "balance": chain.balance_of(lab.wallet.address),
    "settled": sum(1 for r in rows if r["status"] == "settled"),
    "cached": [chat.cached, search.cached, chat.cost.tx_hash],
    "audio": hashlib.sha256(audio).hexdigest(),
    "polls": job.polls - polls_before,
    "media": str(job.media_path),
    "reports": [len(reports.reports), sum(r.owned_before for r in reports.reports),
                reports.paid_atomic],
    "batch": frame["status"].tolist(),
}))
lab.close()
"""


def _run(ledger: Path) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", _CELLS, str(ledger)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


def test_a_second_process_on_the_ledger_continues_the_same_world(tmp_path):
    ledger = tmp_path / "notebook" / "ledger.sqlite"
    (first, said), (second, said_again) = _run(ledger), _run(ledger)
    assert first["transfers"][0] == 0 and first["transfers"][1] > 0
    assert not any(first["cached"][:2]) and first["reports"][1] == 0
    assert first["reports"][0] > 0 and first["reports"][2] > 0
    assert first["batch"] == ["ok"] * 6
    # The same wallet, on the same chain, with the same balance: nothing was paid again.
    assert second["wallet"] == first["wallet"]
    assert second["transfers"] == [first["transfers"][1]] * 2
    assert second["balance"] == first["balance"] < 100 * 10**6
    assert second["settled"] == first["settled"] == first["transfers"][1]
    assert second["cached"] == [True, True, first["cached"][2]]
    # The finished job gives back its own media from its file, without polling.
    assert second["audio"] == first["audio"] and second["media"] == first["media"]
    assert second["polls"] == 0
    # The reports are owned: all of them owned before, nothing paid.
    assert second["reports"] == [first["reports"][0], first["reports"][0], 0]
    assert second["batch"] == ["cached"] * 6
    # The world beside the ledger is private, whatever the umask was.
    world = ledger.with_name("ledger.sqlite.world")
    assert stat.S_IMODE(world.stat().st_mode) == 0o700
    for kept in world.iterdir():
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600, kept.name
    media = Path(first["media"])
    assert stat.S_IMODE(media.stat().st_mode) == 0o600
    assert stat.S_IMODE(media.parent.stat().st_mode) == 0o700
    key = json.loads((world / "world.json").read_text())["key"]
    assert key[2:].lower() not in (said + said_again).lower()


def test_without_a_ledger_each_connect_is_a_new_world():
    one, two = xl.connect(), xl.connect()
    try:
        assert one.wallet.address != two.wallet.address
        assert one.ledger.path != two.ledger.path
        assert not one.ledger.path.with_name("ledger.sqlite.world").exists()
    finally:
        one.close()
        two.close()
