"""The ``rate_limits`` table: what each batch paying from one wallet has learned of a
service's rate, so that processes sharing a ledger learn it together (the batch's rate
sharing reads and writes it through ``RateLimits``), and when the wallet's payments left.

One row per (wallet, service, member): a member is one running batch, with a random id. Its
rate, the rate it saw all of them run at (``wallet_rate``), the time of its last cut and
when it last wrote. The same SQL runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import NamedTuple

from x402lab.ledger.database import Database

#: The table, created by the ledger's migration 7 (``schema.py``).
RATE_LIMITS = """
CREATE TABLE IF NOT EXISTS rate_limits (
    payer TEXT NOT NULL,
    service TEXT NOT NULL,
    member TEXT NOT NULL,
    rate REAL,
    wallet_rate REAL,
    cut_at REAL NOT NULL DEFAULT 0,
    seen_at REAL NOT NULL,
    PRIMARY KEY (payer, service, member)
)
"""


class RateRow(NamedTuple):
    """One member's row: its rates, its last cut and when it last wrote (unix seconds)."""

    rate: float | None  # None while the member knows no limit
    wallet_rate: float | None
    cut_at: float  # 0: no cut yet
    seen_at: float


#: Rows scanned back from the newest payment for ``sent_times`` (ids grow with time), so
#: the scan stays short in a long ledger.
RECENT_PAYMENTS = 100_000


class RateLimits:
    """The ``rate_limits`` rows of one wallet and service, in one database."""

    def __init__(self, db: Database, payer: str, service: str) -> None:
        self.db = db
        self.payer = payer.lower()
        self.service = service

    def write(self, member: str, row: RateRow) -> None:
        """Write (or replace) ``member``'s row."""
        self.db.write_one(
            "INSERT INTO rate_limits (payer, service, member, rate, wallet_rate, cut_at, seen_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payer, service, member) DO UPDATE SET"
            " rate = excluded.rate, wallet_rate = excluded.wallet_rate,"
            " cut_at = excluded.cut_at, seen_at = excluded.seen_at",
            (self.payer, self.service, member, *row),
        )

    def others(self, member: str, since: float) -> list[RateRow]:
        """The other members' rows written after ``since``."""
        rows = self.db.read(
            "SELECT rate, wallet_rate, cut_at, seen_at FROM rate_limits"
            " WHERE payer = ? AND service = ? AND member <> ? AND seen_at > ?",
            (self.payer, self.service, member, since),
        )
        return [RateRow(*row) for row in rows]

    def forget(self, before: float) -> None:
        """Delete the rows last written before ``before``."""
        self.db.write_one(
            "DELETE FROM rate_limits WHERE payer = ? AND service = ? AND seen_at < ?",
            (self.payer, self.service, before),
        )

    def sent_times(self, since: float) -> list[float]:
        """When this wallet's payments were made since ``since`` (each one request sent),
        oldest first, in unix seconds."""
        rows = self.db.read(
            "SELECT ts_us FROM payments WHERE id > (SELECT COALESCE(MAX(id), 0) FROM payments)"
            " - ? AND ts_us >= ? AND lower(payer) = ? ORDER BY ts_us",
            (RECENT_PAYMENTS, int(since * 1_000_000), self.payer),
        )
        return [int(row[0]) / 1_000_000 for row in rows]
