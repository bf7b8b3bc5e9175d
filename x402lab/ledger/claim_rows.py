"""The SQL of the ``claims`` table: its reads, and the payments a claim looks up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from x402lab.ledger.database import Row, Tx, chunks, marks
from x402lab.ledger.records import ClaimRecord, claim_record
from x402lab.ledger.statuses import BY_WEIGHT, MAYBE_PAID, ClaimStatus, PaymentStatus, in_sql

LIGHT = "id, key, status, payment_key, ledger_id, ledger_floor, owner, label, updated_us"
FULL = (
    "SELECT c.id, c.scope, c.key, c.status, c.payment_key, c.ledger_id, c.owner, c.label,"
    " c.created_us, c.updated_us, c.error, c.answer, p.status AS payment_status,"
    " p.amount_atomic, p.tx_hash FROM claims c LEFT JOIN payments p ON p.id = c.ledger_id"
)
INSERT = (
    "INSERT INTO claims (scope, key, status, payment_key, ledger_id, ledger_floor, owner, label,"
    " created_us, updated_us, error, answer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def deciding(rows: Sequence[Row]) -> Row | None:
    """The row that decides a key: its newest row that is not ``failed``."""
    for row in reversed(rows):
        if row["status"] != ClaimStatus.FAILED:
            return row
    return None


def history_in(tx: Tx, scope: str, keys: Sequence[str]) -> dict[str, list[Row]]:
    """Every row of each key, oldest first (only keys with rows)."""
    out: dict[str, list[Row]] = {}
    for chunk in chunks(keys):
        for row in tx.all(
            f"SELECT {LIGHT} FROM claims WHERE scope = ? AND key IN ({marks(len(chunk))})"
            " ORDER BY id",
            (scope, *chunk),
        ):
            out.setdefault(row["key"], []).append(row)
    return out


def payments_in(
    tx: Tx, floors: Mapping[str, int], statuses: Sequence[PaymentStatus] = MAYBE_PAID
) -> dict[str, tuple[int, str]]:
    """Per payment key, its strongest payment in ``statuses`` (``BY_WEIGHT``, then the
    newest) among its rows newer than the key's floor: ``(ledger id, status)``."""
    best: dict[str, tuple[int, str]] = {}
    rank = {str(status): weight for weight, status in enumerate(BY_WEIGHT)}
    for chunk in chunks(list(floors)):
        for row_id, request_key, status in tx.all(
            "SELECT id, request_key, status FROM payments"
            f" WHERE request_key IN ({marks(len(chunk))}) AND {in_sql('status', statuses)}"
            " ORDER BY id",
            chunk,
        ):
            if row_id <= floors[request_key]:
                continue
            kept = best.get(request_key)
            if kept is None or rank[status] <= rank[kept[1]]:
                best[request_key] = (row_id, status)
    return best


def records_in(tx: Tx, ids: Sequence[int]) -> dict[int, ClaimRecord]:
    out: dict[int, ClaimRecord] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for row in tx.all(f"{FULL} WHERE c.id IN ({marks(len(chunk))})", chunk):
            out[row["id"]] = claim_record(row)
    return out
