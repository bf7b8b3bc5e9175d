"""The ledger's rows as a table: the declared Arrow schema, and the pandas conversion every
declared table of x402lab goes through."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

COLUMNS = (
    "id",
    "ts",
    "service",
    "method",
    "path",
    "model",
    "request_key",
    "budget",
    "amount_atomic",
    "amount_usd",
    "upstream_usd",
    "price_mult",
    "status",
    "held",
    "tx_hash",
    "payer",
    "user",
    "pay_to",
    "network",
    "asset",
    "nonce",
    "error",
    "expires_at",
    "resends",
    "resolved_by",
    "prepaid",
)


def ledger_schema() -> pa.Schema:
    """The declared Arrow schema of ledger rows (``amount_usd`` exact, ``tables.usd``)."""
    import pyarrow as pa

    from x402lab.tables.usd import USD

    text = pa.string()
    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("service", text, nullable=False),
            ("method", text),
            ("path", text),
            ("model", text),
            ("request_key", text),
            pa.field("budget", text, nullable=False),
            pa.field("amount_atomic", pa.int64(), nullable=False),
            pa.field("amount_usd", USD, nullable=False),
            ("upstream_usd", pa.float64()),
            ("price_mult", pa.float64()),
            pa.field("status", text, nullable=False),
            pa.field("held", pa.bool_(), nullable=False),
            ("tx_hash", text),
            ("payer", text),
            ("user", text),
            ("pay_to", text),
            ("network", text),
            ("asset", text),
            ("nonce", text),
            ("error", text),
            ("expires_at", pa.timestamp("us", tz="UTC")),
            pa.field("resends", pa.int64(), nullable=False),
            ("resolved_by", text),
            pa.field("prepaid", pa.bool_(), nullable=False),
        ]
    )


def ledger_record(row: Any) -> dict[str, Any]:
    """A ``payments`` table row (by column name) as a dict of the ``ledger_schema`` columns."""
    from datetime import UTC, datetime

    from x402lab.tables.usd import usd_value

    record = {key: row[key] for key in row.keys()}  # noqa: SIM118 (a database row, not a dict)
    record["amount_usd"] = usd_value(row["amount_atomic"])  # exact, as in the table
    record["ts"] = datetime.fromtimestamp(row["ts_us"] / 1_000_000, tz=UTC)
    record["held"] = bool(record.get("held"))
    record["resends"] = int(record.get("resends") or 0)
    record["prepaid"] = bool(record.get("prepaid"))
    record["user"] = record.get("user_label")
    valid_before = record.get("valid_before")
    record["expires_at"] = (
        datetime.fromtimestamp(valid_before, tz=UTC) if valid_before is not None else None
    )
    return {name: record.get(name) for name in COLUMNS}


def ledger_table(records: list[dict[str, Any]]) -> pa.Table:
    """Ledger rows (dicts of ``ledger_record``) as an Arrow table with the declared schema."""
    import pyarrow as pa

    from x402lab.tables.usd import usd_array

    schema = ledger_schema()
    columns: dict[str, Any] = {name: [record[name] for record in records] for name in schema.names}
    columns["amount_usd"] = usd_array(columns["amount_atomic"])
    return pa.table(columns, schema=schema)


def arrow_to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow to pandas keeping the declared dtypes: int64 stays int64 (nullable when needed),
    timestamps stay tz-aware UTC, a decimal (a USD amount, ``tables.usd``) stays an exact
    Arrow-backed decimal, and an empty table keeps its columns and dtypes."""
    import pandas as pd
    import pyarrow as pa

    def mapper(arrow_type: pa.DataType) -> Any:
        if pa.types.is_integer(arrow_type):
            return pd.Int64Dtype()
        if pa.types.is_boolean(arrow_type):
            return pd.BooleanDtype()
        if pa.types.is_decimal(arrow_type):
            return pd.ArrowDtype(arrow_type)
        return None

    # Dtypes follow the schema, not the data: a non-nullable integer field is int64, a
    # nullable one Int64, whether or not this table happens to hold a null.
    required_ints = [
        field.name
        for field in table.schema
        if pa.types.is_integer(field.type) and not field.nullable
    ]
    frame = table.to_pandas(types_mapper=mapper)
    for name in required_ints:
        frame[name] = frame[name].astype("int64")
    return frame
