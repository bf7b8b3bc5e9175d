"""What a purchase asks for (``Selection``), what it costs (``ReportQuote``), and the report
service's errors restated for a person (``explain``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from x402lab.errors import ConfigError
from x402lab.money import atomic_to_decimal, format_usd, usd_to_atomic
from x402lab.routes import REPORTS_BUY

SELECTS = ("all", "range")


@dataclass(frozen=True)
class ReportQuote:
    """The price of a selection, read from its 402 (nothing signed).

    ``amount_atomic`` is what the service asks for the whole selection; ``to_pay_atomic`` is
    what ``buy`` would pay after leaving out the ``owned`` reports already in the library.
    """

    handle: str
    select: str
    report_count: int
    unit_price_usd: float
    amount_atomic: int
    owned: int
    network: str
    asset: str
    pay_to: str
    resource: str | None

    @property
    def amount_usd(self) -> Decimal:
        """The amount, exact."""
        return atomic_to_decimal(self.amount_atomic)

    @property
    def unit_price_atomic(self) -> int:
        return usd_to_atomic(self.unit_price_usd)

    @property
    def to_pay_atomic(self) -> int:
        return self.unit_price_atomic * max(0, self.report_count - self.owned)

    @property
    def to_pay_usd(self) -> Decimal:
        return atomic_to_decimal(self.to_pay_atomic)

    def __repr__(self) -> str:
        return (
            f"<ReportQuote @{self.handle} select={self.select}: {self.report_count} report(s)"
            f" × {self.unit_price_usd} USD = {format_usd(self.amount_atomic)};"
            f" {self.owned} owned, buy would pay {format_usd(self.to_pay_atomic)}>"
        )


@dataclass(frozen=True)
class Selection:
    """What the caller asked for, as query parameters."""

    select: str
    ids: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None

    def params(self, username: str) -> dict[str, str]:
        params = {"username": username, "select": self.select}
        if self.ids:
            params["ids"] = ",".join(self.ids)
        if self.since is not None:
            params["from"] = self.since
        if self.until is not None:
            params["to"] = self.until
        return params

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params("").items() if k != "username")

    def pick(self, items: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """The menu ids this selection covers (the service's rules: constraints combine with
        AND, bounds compare createdAt as strings, inclusive); None for a range without any."""
        if self.select == "range" and not (self.ids or self.since or self.until):
            return None
        wanted = set(self.ids)
        chosen = []
        for item in items:
            report_id, created = item.get("id"), item.get("createdAt")
            if not isinstance(report_id, str):
                continue
            if self.select == "range":
                created = created if isinstance(created, str) else ""
                if wanted and report_id not in wanted:
                    continue
                if self.since is not None and created < self.since:
                    continue
                if self.until is not None and created > self.until:
                    continue
            chosen.append(report_id)
        return chosen


def _bound(value: str | datetime | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    # The app writes toISOString() timestamps; compare in the same form.
    moment = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_selection(
    select: str | None,
    ids: Sequence[str] | str | None,
    from_: str | datetime | None,
    to: str | datetime | None,
) -> Selection:
    if isinstance(ids, str):
        ids = [part for part in ids.split(",")]
    id_list = tuple(dict.fromkeys(i.strip() for i in ids or () if i.strip()))
    since, until = _bound(from_), _bound(to)
    ranged = bool(id_list) or since is not None or until is not None
    if select is None:
        select = "range" if ranged else "all"
    if select not in SELECTS:
        raise ConfigError(f"select must be 'all' or 'range', got {select!r}")
    if select == "all" and ranged:
        raise ConfigError("select='all' takes no ids, from_ or to (they mean select='range')")
    return Selection(select, id_list, since, until)


def buy_path(params: Mapping[str, str]) -> str:
    return f"{REPORTS_BUY}?{urlencode(params)}"
