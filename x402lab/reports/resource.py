"""The paid report service (docs/services.md): shelf, menus, free quotes, purchases.

``buy`` consults the local library (``ReportLibrary``, in the ledger's file) before paying:
reports already owned are never paid again; when part of a selection is owned it buys only
the missing ids (``select=range&ids=...``); when all of it is owned it sends no paid request.
Before paying it reads the 402 unpaid (free) and caps the payment at that exact amount, so a
selection that grew or a price that rose between the two requests is refused, not paid.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from x402lab.errors import (
    ApiError,
    ConfigError,
    NotFound,
    ProtocolError,
    X402LabError,
)
from x402lab.ledger import Order, ReportLibrary
from x402lab.money import atomic_to_usd, usd_to_atomic
from x402lab.payments import CallInfo
from x402lab.reports.errors import explain
from x402lab.reports.selection import ReportQuote, Selection, buy_path, parse_selection
from x402lab.routes import REPORTS, REPORTS_BUY, REPORTS_LIST
from x402lab.sync import Twin, blocking
from x402lab.tables.reports import (
    OwnedReport,
    ReportSet,
    library_table,
    menu_table,
    shelf_table,
    to_frame,
)

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.session import Session
    from x402lab.transport import Reply, ServiceClient
    from x402lab.x402.models import PaymentRequired


class AsyncReports:
    """``lab.reports``: the shelf, menus, free quotes and purchases of report snapshots."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._configured: bool | None = None
        self._store: ReportLibrary | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"<Reports {self._session.reports_url} configured={self._configured}>"

    @property
    def configured(self) -> bool | None:
        """Whether the deployment has a report store, as the last ``shelf()`` said (None
        before any)."""
        return self._configured

    @property
    def store(self) -> ReportLibrary:
        """The local library of this report service (in the ledger's file)."""
        if self._store is None:
            if self._session.reports_url is None:
                raise ConfigError("no reports address was given to connect()")
            self._store = ReportLibrary(self._session.ledger, self._session.name(REPORTS))
        return self._store

    def _client(self) -> ServiceClient:
        return self._session.client(REPORTS)

    async def _get(self, path: str, handle: str, what: str, **params: Any) -> Any:
        try:
            reply = await self._client().send("GET", path, params=params or None)
        except X402LabError as exc:
            raise explain(exc, handle, what) from exc
        return _json(reply)

    # -- free -------------------------------------------------------------------------------

    async def shelf(self) -> pd.DataFrame:
        """The shelf (free): one row per handle, newest first; ``df.attrs["configured"]``
        says whether the deployment has a report store (False: an empty shelf)."""
        body = await self._get(REPORTS_LIST, "", "")
        if not isinstance(body, Mapping):
            raise ProtocolError("the shelf answer is not a JSON object")
        entries = [e for e in body.get("entries") or [] if isinstance(e, Mapping)]
        self._configured = bool(body.get("configured", bool(entries)))
        fetched = datetime.now(UTC)
        return to_frame(
            shelf_table(entries, fetched_at=fetched),
            configured=self._configured,
            fetched_at=fetched,
        )

    async def _menu(self, handle: str) -> tuple[str, list[Mapping[str, Any]]]:
        body = await self._get(REPORTS_BUY, handle, "", username=handle)
        if not isinstance(body, Mapping) or not isinstance(body.get("reports"), list):
            raise ProtocolError(f"the menu of @{handle} is not a JSON object with reports")
        username = body.get("username")
        canonical = username if isinstance(username, str) and username else handle
        items = [r for r in body["reports"] if isinstance(r, Mapping)]
        return canonical.lstrip("@").lower(), items

    async def menu(self, handle: str) -> pd.DataFrame:
        """The report menu of ``handle`` (free): one row per report, newest first, with the
        date range as ``date_from``/``date_to`` and ``owned`` for reports in the library.

        Raises NotFound for a handle that is not on the shelf.
        """
        username, items = await self._menu(handle)
        fetched = datetime.now(UTC)
        table = menu_table(username, items, self.store.owned(username), fetched_at=fetched)
        return to_frame(table, handle=username, report_count=len(items), fetched_at=fetched)

    async def quote(
        self,
        handle: str,
        select: str | None = None,
        *,
        ids: Sequence[str] | str | None = None,
        from_: str | datetime | None = None,
        to: str | datetime | None = None,
    ) -> ReportQuote:
        """The price of a selection (free): sends it unpaid and reads the 402; nothing signed.

        ``select`` is "all" (the default without ids/from_/to) or "range". Raises NotFound
        (unknown handle, no matching report) and ApiError (400 range without bounds, 501).
        """
        selection = parse_selection(select, ids, from_, to)
        username, items = await self._menu(handle)
        challenge = await self._probe(username, selection)
        chosen = selection.pick(items) or []
        return _quote(username, selection, challenge, len(self.store.owned(username) & set(chosen)))

    async def _probe(self, username: str, selection: Selection) -> PaymentRequired:
        try:
            return await self._client().probe("GET", REPORTS_BUY, params=selection.params(username))
        except X402LabError as exc:
            raise explain(exc, username, selection.describe()) from exc

    async def library(self, handle: str | None = None) -> pd.DataFrame:
        """The owned reports of this service (free, local): one row per report with when and
        how it was bought (order, ledger row, tx hash, price)."""
        username = handle.lstrip("@").lower() if handle else None
        return to_frame(library_table(self.store.records(username)))

    # -- paid -------------------------------------------------------------------------------

    async def buy(
        self,
        handle: str,
        select: str | None = None,
        *,
        ids: Sequence[str] | str | None = None,
        from_: str | datetime | None = None,
        to: str | datetime | None = None,
        max_usd: float | None = None,
        first_party: bool = False,
        rebuy: bool = False,
    ) -> ReportSet:
        """Spends money: buys the reports of a selection that the library does not hold yet.

        Returns a ReportSet of the whole selection (owned before and newly bought). Nothing
        is paid for owned reports; when all are owned no paid request is sent. ``max_usd``
        caps this purchase. ``first_party=True`` reads with the library secret given to
        ``connect(library_secret=...)`` (operators only; free, never the default).
        ``rebuy=True`` pays again for reports whose earlier purchase ended unclear.

        Raises NotFound (unknown handle, no matching report), ApiError (400, 501),
        PaymentRefused/BudgetExceeded (nothing signed), PaymentRejected (409 reused payment
        id, insufficient_payment; nothing settled) and SettlementUnknown.
        """
        selection = parse_selection(select, ids, from_, to)
        secret = self._library_secret(first_party)
        username, items = await self._menu(handle)
        chosen = selection.pick(items)
        if not chosen:
            # The service is the authority on these errors (400 range without bounds,
            # 404 no match): ask it, unpaid.
            await self._probe(username, selection)
            raise NotFound(
                f"no report of @{username} matches {selection.describe()} in its menu;"
                " nothing was charged",
                status=404,
                code="no_matching_reports",
            )
        async with self._locks.setdefault(username, asyncio.Lock()):
            owned = self.store.owned(username) & set(chosen)
            missing = [i for i in chosen if i not in owned]
            if not missing:
                return self._report_set(username, selection, chosen, owned)
            # Nothing owned: the caller's own query. Partly owned: exactly the missing ids.
            request = selection if not owned else Selection("range", tuple(missing))
            order = self.store.claim(
                username,
                missing,
                buy_path(request.params(username)),
                first_party=secret is not None,
                rebuy=rebuy,
            )
            # The purchase's settlement is committed with the reports it bought
            # (``Reply.settlement``), or alone when they cannot be stored.
            settlement = None
            try:
                try:
                    if secret is not None:
                        reply = await self._first_party(username, request, secret)
                    else:
                        reply = await self._pay(username, request, missing, order, max_usd)
                    settlement = reply.settlement
                    body = _json(reply)
                    if not isinstance(body, Mapping) or not isinstance(body.get("reports"), list):
                        raise ProtocolError("the paid answer holds no reports list")
                except BaseException as exc:
                    if settlement is not None:
                        settlement.commit()  # first: the order's claims then find it settled
                    status = self.store.close_failed(order, f"{type(exc).__name__}: {exc}")
                    if isinstance(exc, ProtocolError) and status == "unknown":
                        raise ProtocolError(
                            f"paid for {len(missing)} report(s) of @{username} but the answer was"
                            f" unreadable ({exc}); order {order.id} is 'unknown' and will not be"
                            " paid again automatically"
                        ) from exc
                    if isinstance(exc, X402LabError):
                        raise explain(exc, username, request.describe()) from exc
                    raise
                cost = reply.cost
                reports = [r for r in body["reports"] if isinstance(r, Mapping)]
                charged = body.get("chargedUsd")
                self.store.complete(
                    order,
                    reports,
                    ledger_id=cost.ledger_id if cost else None,
                    receipt=cost.receipt if cost else None,
                    charged_usd=float(charged) if isinstance(charged, int | float) else None,
                    response_text=reply.response.text,
                    settlement=settlement,
                )
            finally:
                if settlement is not None:
                    settlement.commit()  # stored with the reports, or alone
            received = [str(r.get("id")) for r in reports if isinstance(r.get("id"), str)]
            return self._report_set(
                username,
                selection,
                list(dict.fromkeys([*chosen, *received])),
                owned,
                cost=cost,
                charged=float(charged) if isinstance(charged, int | float) else None,
            )

    def _library_secret(self, first_party: bool) -> str | None:
        if not first_party:
            return None
        secret = self._session.library_secret
        if not secret:
            raise ConfigError(
                "first_party=True needs the operator's library secret:"
                " connect(..., library_secret=...)"
            )
        return str(secret)

    async def _pay(
        self,
        username: str,
        request: Selection,
        expected: list[str],
        order: Order,
        max_usd: float | None,
    ) -> Reply:
        challenge = await self._probe(username, request)
        count = (challenge.extensions or {}).get("reportCount")
        if isinstance(count, int) and count != len(expected):
            raise ApiError(
                f"the service would charge for {count} report(s) of @{username} where the"
                f" menu gives {len(expected)}: nothing was paid; look at the menu and try again",
                status=402,
            )
        cap = challenge.accepts[0].amount
        if max_usd is not None:
            cap = min(cap, usd_to_atomic(max_usd))
        params = request.params(username)
        call = CallInfo(
            service=REPORTS,
            method="GET",
            path=buy_path(params),
            request_key=order.request_key,
            max_atomic=cap,
            stores_answer=True,
        )
        return await self._client().send("GET", REPORTS_BUY, params=params, call=call)

    async def _first_party(self, username: str, request: Selection, secret: str) -> Reply:
        headers = {"Authorization": f"Bearer {secret}"}
        reply = await self._client().send(
            "GET",
            REPORTS_BUY,
            params=request.params(username),
            headers=headers,
            expect_402=True,
        )
        if reply.response.status_code == 402:
            raise ApiError(
                f"the report service did not accept the library secret for @{username}"
                " (it answered with a payment challenge); nothing was paid",
                status=402,
                url=str(reply.response.request.url),
            )
        return reply

    def _report_set(
        self,
        username: str,
        selection: Selection,
        ids: list[str],
        owned_before: set[str],
        *,
        cost: Any = None,
        charged: float | None = 0.0,
    ) -> ReportSet:
        reports = tuple(
            OwnedReport(
                report_id=record["report_id"],
                handle=record["handle"],
                snapshot=record["snapshot"],
                owned_before=record["report_id"] in owned_before,
                bought_at=record["bought_at"],
                first_party=record["first_party"],
                ledger_id=record["ledger_id"],
                tx_hash=record["tx_hash"],
            )
            for record in self.store.records(username, ids)
        )
        paid = (cost.amount_atomic or 0) if cost is not None else 0
        return ReportSet(
            handle=username,
            reports=reports,
            paid_atomic=paid,
            charged_usd=charged,
            costs=(cost,) if cost is not None else (),
            select=selection.select,
        )


def _json(reply: Reply) -> Any:
    try:
        return reply.json()
    except ValueError as exc:
        raise ProtocolError(f"the report service answered non-JSON: {exc}") from exc


def _quote(
    username: str, selection: Selection, challenge: PaymentRequired, owned: int
) -> ReportQuote:
    first = challenge.accepts[0]
    ext = challenge.extensions or {}
    count = ext.get("reportCount")
    unit = ext.get("unitPriceUsd")
    report_count = count if isinstance(count, int) else 0
    if not isinstance(unit, int | float):
        unit = float(atomic_to_usd(first.amount) or 0.0) / report_count if report_count else 0.0
    resource = ext.get("resource")
    return ReportQuote(
        handle=username,
        select=str(ext.get("select") or selection.select),
        report_count=report_count,
        unit_price_usd=float(unit),
        amount_atomic=first.amount,
        owned=owned,
        network=first.network,
        asset=first.asset,
        pay_to=first.pay_to,
        resource=resource if isinstance(resource, str) else None,
    )


class Reports(Twin[AsyncReports]):
    __doc__ = AsyncReports.__doc__
    __slots__ = ()

    shelf = blocking(AsyncReports.shelf)
    menu = blocking(AsyncReports.menu)
    quote = blocking(AsyncReports.quote)
    library = blocking(AsyncReports.library)
    buy = blocking(AsyncReports.buy)

    @property
    def configured(self) -> bool | None:
        """Whether the deployment has a report store, as the last ``shelf()`` said."""
        return self._async.configured

    @property
    def store(self) -> ReportLibrary:
        """The local library of this report service (in the ledger's file)."""
        return self._async.store
