"""A ``payments`` row as a record of the ledger table (its schema is ``x402lab.tables.ledger``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from x402lab.ledger.database import Row
from x402lab.tables.ledger import COLUMNS, arrow_to_pandas, ledger_schema
from x402lab.tables.usd import usd_array, usd_value

if TYPE_CHECKING:
    import pyarrow as pa


def as_record(row: Row) -> dict[str, Any]:
    """A ``payments`` row as a dict of the ``ledger_schema`` columns. ``held`` is what the
    query selected as held *now* (``held_now``, see ``Ledger.rows``) when it did."""
    from datetime import UTC, datetime

    record = {key: row[key] for key in row.keys()}  # noqa: SIM118 (a Row, not a dict)
    record["amount_usd"] = usd_value(row["amount_atomic"])  # exact, as in the table
    record["ts"] = datetime.fromtimestamp(row["ts_us"] / 1_000_000, tz=UTC)
    record["held"] = bool(record.get("held_now", record.get("held")))
    record["resends"] = int(record.get("resends") or 0)
    record["prepaid"] = bool(record.get("prepaid"))
    record["user"] = record.get("user_label")
    valid_before = record.get("valid_before")
    record["expires_at"] = (
        datetime.fromtimestamp(valid_before, tz=UTC) if valid_before is not None else None
    )
    return {name: record.get(name) for name in COLUMNS}


def records_table(records: list[dict[str, Any]]) -> pa.Table:
    """Ledger rows (dicts of ``as_record``) as an Arrow table with the declared schema."""
    import pyarrow as pa

    schema = ledger_schema()
    columns: dict[str, Any] = {name: [record[name] for record in records] for name in schema.names}
    columns["amount_usd"] = usd_array(columns["amount_atomic"])
    return pa.table(columns, schema=schema)


__all__ = ["COLUMNS", "arrow_to_pandas", "as_record", "ledger_schema", "records_table"]
