"""Answers stored together: the answers of one paid request in one row of ``answer_packs``,
each claim of them pointing at its bytes there (``pack_id``, ``pack_offset``,
``pack_length``; migration 10).

Why: an embedding's stored answer (4,104 bytes at 1,024 dimensions: an 8-byte token count and
the float32 vector) does not fit SQLite's 4 KB page, so one answer per claim row took an
overflow page of its own, part of it left empty, and PostgreSQL cut each into three TOAST
chunks, the last one small. The answers of one request of 256 texts, one blob of about 1 MB,
fill every overflow page (every TOAST chunk) but the last, and the claim rows stay small.
Figures: docs/embeddings.md.

Which answers: those a caller asks to pack (``Claims.complete_in(packed=True)``), a batch's
embedding answers (``BatchStore``): many of one size per paid request. Other answers (chat
text, typed JSON, a media job's queue id, a report's snapshot) stay inline in
``claims.answer``: mostly one per request, or small, where a pack saves nothing and costs a
row. So do the answers of a request that stores fewer than ``MIN_PACKED`` (one text per
request). Answers stored before this version stay inline; both are read alike.

Reading: the claim rows first, then each pack among them once (``pack_bodies``), and each
answer is the slice of its pack's bytes (``answer_of``): the bytes as written, never
re-encoded. Not ``substr`` in SQL: SQLite reads the whole blob to take a slice of it, so 256
answers of one pack read that way read the pack 256 times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from x402lab.ledger.database import Row, Tx, chunks, marks
from x402lab.ledger.ddl import add_column, run_ddl

PACKS = """
CREATE TABLE IF NOT EXISTS answer_packs (
    id INTEGER PRIMARY KEY,
    payment_key TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    body BLOB NOT NULL
)
"""
#: Where a claim's answer is in its pack; NULL when it is inline in ``claims.answer`` (or none).
POINTERS = ("pack_id", "pack_offset", "pack_length")
#: The fewest answers of one request stored as a pack: one alone gains nothing from it.
MIN_PACKED = 2

#: One stored answer's columns: ``claims.answer`` and its ``POINTERS``.
Placed = tuple[bytes | None, int | None, int | None, int | None]
Fetch = Callable[[str, Sequence[Any]], list[Row]]


def migrate(tx: Tx) -> None:
    """Migration 10: the packs' table and the claims' pointers into it."""
    run_ddl(tx, PACKS)
    present = tx.columns("claims")
    for name in POINTERS:
        if name not in present:
            add_column(tx, "claims", name, "INTEGER")
    if tx.dialect == "postgresql":
        # float32 bytes do not compress: kept as they are, without trying (measured in
        # docs/embeddings.md), and a slice of them can be read without the rest.
        tx.execute("ALTER TABLE answer_packs ALTER COLUMN body SET STORAGE EXTERNAL")


def place(
    tx: Tx, payment_key: str | None, answers: Sequence[tuple[str, bytes | None]], now_us: int
) -> dict[str, Placed]:
    """Where each of ``answers`` (of the one paid request ``payment_key``) is stored: in one
    new pack when ``payment_key`` is given and at least ``MIN_PACKED`` of them are answers,
    else inline. Writes the pack inside ``tx`` (the transaction of their settlement)."""
    packed = [(key, answer) for key, answer in answers if answer is not None]
    if payment_key is None or len(packed) < MIN_PACKED:
        return {key: (answer, None, None, None) for key, answer in answers}
    pack_id = tx.insert(
        "INSERT INTO answer_packs (payment_key, created_us, body) VALUES (?, ?, ?)",
        (payment_key, now_us, b"".join(answer for _, answer in packed)),
    )
    out: dict[str, Placed] = {key: (None, None, None, None) for key, _ in answers}
    offset = 0
    for key, answer in packed:
        out[key] = (None, pack_id, offset, len(answer))
        offset += len(answer)
    return out


def pack_bodies(fetch: Fetch, rows: Sequence[Row]) -> dict[int, bytes]:
    """The bytes of every pack that claim ``rows`` point into, each read once."""
    ids = list(dict.fromkeys(row["pack_id"] for row in rows if row["pack_id"] is not None))
    out: dict[int, bytes] = {}
    for chunk in chunks(ids):
        sql = f"SELECT id, body FROM answer_packs WHERE id IN ({marks(len(chunk))})"
        out.update((int(pack_id), bytes(body)) for pack_id, body in fetch(sql, chunk))
    return out


def answer_of(row: Row, bodies: Mapping[int, bytes]) -> bytes | None:
    """A claim row's stored answer: inline, or its slice of its pack (``pack_bodies``)."""
    pack_id = row["pack_id"]
    if pack_id is None:
        answer = row["answer"]
        return bytes(answer) if answer is not None else None
    start = int(row["pack_offset"])
    return bodies[pack_id][start : start + int(row["pack_length"])]
