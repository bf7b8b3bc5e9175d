"""batch_embed's answers in the ledger as packs (``ledger.packs``), on SQLite and PostgreSQL:
one pack per paid request holding exactly the vectors' bytes; a second process re-running the
batch reads them back (cached, nothing paid) identical; a ledger of the format before packs
(answers inline in ``claims.answer``, schema version 9) is migrated and read back the same."""

from __future__ import annotations

import json
import secrets
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from support.batch import EMBED

import x402lab as xl
from x402lab.ledger import open_database
from x402lab.ledger.postgres import VERSION_TABLE

ROOT = Path(__file__).resolve().parents[2]
ARGS = dict(model=EMBED, rows_per_request=8, dimensions=16, progress=None)
SIZE = 8 + 4 * 16  # a stored answer: its token count, then 16 float32
TEXTS = [f"note {i} on the river and the stone market" for i in range(37)]  # 5 packs, 1 short

#: The same batch in a process of its own: its statuses, and its vectors in a .npy file.
_RERUN = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import x402lab as xl
    gateway, reports, ledger, key, args, out = sys.argv[1:7]
    args = json.loads(args)
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_key(key), ledger=ledger,
                     budget=xl.Budget(usd=5))
    frame = lab.batch_embed(args.pop("texts"), **args)
    np.save(out, np.stack(frame["vector"].to_list()))
    print(json.dumps(frame["status"].tolist()))
    lab.close()
    """
)


def rerun_elsewhere(emulator, ledger: str, key: str, out: Path) -> tuple[list[str], np.ndarray]:
    args = json.dumps({"texts": TEXTS, **ARGS})
    argv = [emulator.gateway_url, emulator.reports_url, ledger, key, args, str(out)]
    done = subprocess.run(
        [sys.executable, "-c", _RERUN, *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(out.parent)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), np.load(out)


def first_run(emulator, ledger_url: str, key: str):
    lab = xl.connect(
        emulator.gateway_url,
        emulator.reports_url,
        wallet=xl.Wallet.from_key(key),
        budget=xl.Budget(usd=5),
        ledger=ledger_url,
    )
    frame = lab.batch_embed(TEXTS, **ARGS)
    lab.close()
    assert (frame["status"] == "ok").all()
    return frame


def test_each_paid_request_is_one_pack_of_exactly_its_vectors(emulator, ledger_url):
    frame = first_run(emulator, ledger_url, "0x" + secrets.token_hex(32))
    db = open_database(ledger_url)
    packs = db.read("SELECT id, payment_key, body FROM answer_packs ORDER BY id")
    assert len(packs) == len(emulator.chain.transfers()) == 5
    claims = db.read(
        "SELECT payment_key, answer, pack_id, pack_offset, pack_length FROM claims"
        " WHERE scope = 'batch:embed' ORDER BY pack_id, pack_offset"
    )
    assert len(claims) == len(TEXTS) and all(c["answer"] is None for c in claims)
    for pack in packs:
        body = bytes(pack["body"])
        mine = [c for c in claims if c["pack_id"] == pack["id"]]
        assert {c["payment_key"] for c in mine} == {pack["payment_key"]}
        # The slices tile the pack: no byte of it belongs to no answer, nor to two.
        assert [c["pack_offset"] for c in mine] == [SIZE * i for i in range(len(mine))]
        assert sum(c["pack_length"] for c in mine) == len(body) == SIZE * len(mine)
        # Each slice is the 8-byte token count (none: -1 in a pack) and the float32 vector.
        vectors = frame.loc[frame["request_key"] == pack["payment_key"], "vector"]
        expected = sorted(struct.pack("<q", -1) + v.astype("<f4").tobytes() for v in vectors)
        slices = [body[c["pack_offset"] : c["pack_offset"] + c["pack_length"]] for c in mine]
        assert sorted(slices) == expected
    db.close()


def test_a_second_process_reads_the_packed_vectors_back(emulator, ledger_url, tmp_path):
    key = "0x" + secrets.token_hex(32)
    frame = first_run(emulator, ledger_url, key)
    paid = len(emulator.chain.transfers())
    statuses, vectors = rerun_elsewhere(emulator, ledger_url, key, tmp_path / "again.npy")
    assert statuses == ["cached"] * len(TEXTS)
    assert len(emulator.chain.transfers()) == paid  # nothing paid again
    np.testing.assert_array_equal(vectors, np.stack(frame["vector"].to_list()))


def to_the_format_before_packs(url: str) -> int:
    """Rewrite the ledger at ``url`` as the code of schema version 9 wrote it: every answer
    inline in ``claims.answer``, no packs table, no pointer columns. Returns the answers
    moved (read out of the packs by SQL ``substr``, a reader other than ``ledger.packs``)."""
    db = open_database(url)
    with db.transaction() as tx:
        moved = tx.execute(
            "UPDATE claims SET answer = (SELECT substr(body,"
            " CAST(claims.pack_offset AS INTEGER) + 1, CAST(claims.pack_length AS INTEGER))"
            " FROM answer_packs WHERE answer_packs.id = claims.pack_id)"
            " WHERE pack_id IS NOT NULL"
        ).rowcount
        for column in ("pack_id", "pack_offset", "pack_length"):
            tx.execute(f"ALTER TABLE claims DROP COLUMN {column}")
        tx.execute("DROP TABLE answer_packs")
        if db.dialect == "sqlite":
            tx.execute("PRAGMA user_version = 9")
        else:
            tx.execute(f"UPDATE {VERSION_TABLE} SET version = 9")
    db.close()
    return moved


def test_a_ledger_of_inline_answers_is_migrated_and_read_back(emulator, ledger_url, tmp_path):
    key = "0x" + secrets.token_hex(32)
    frame = first_run(emulator, ledger_url, key)
    paid = len(emulator.chain.transfers())
    assert to_the_format_before_packs(ledger_url) == len(TEXTS)
    earlier = open_database(ledger_url)
    assert earlier.version == 9
    earlier.close()

    statuses, vectors = rerun_elsewhere(emulator, ledger_url, key, tmp_path / "again.npy")
    assert statuses == ["cached"] * len(TEXTS)
    assert len(emulator.chain.transfers()) == paid
    np.testing.assert_array_equal(vectors, np.stack(frame["vector"].to_list()))
    db = open_database(ledger_url)
    assert db.version == xl.ledger.SCHEMA_VERSION  # migrated by the second process
    inline = db.read(
        "SELECT COUNT(*) FROM claims WHERE answer IS NOT NULL AND pack_id IS NULL"
        " AND scope = 'batch:embed'"
    )
    assert inline[0][0] == len(TEXTS)  # kept as they were, not rewritten into packs
    assert db.read("SELECT COUNT(*) FROM answer_packs")[0][0] == 0
    db.close()
