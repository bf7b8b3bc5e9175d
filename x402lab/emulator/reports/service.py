"""The paid report service (docs/services.md): a free shelf, free menus, paid report bodies.

Readings where the service is silent (docs/design.md, "The emulator"): an unknown handle is
404 ``unknown_handle``;
a missing username, a bad select or a bad ISO date is 400 ``invalid_query``; ids, from and
to are accepted with select=range only; payments are read from X-402-Payment, X-Payment and
PAYMENT-SIGNATURE; the payment id is the authorization nonce (used once: 409); a payment
below the price is 402 ``insufficient_payment``; overpayment is accepted and not reflected in
``chargedUsd``. Every error body is ``{"error": code, "message": text}``.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from x402lab.emulator.chain import NONCE_ALREADY_USED, Chain
from x402lab.emulator.payments import PaymentGate, Refusal
from x402lab.emulator.reports.library import Handle, build_library
from x402lab.emulator.settings import EmulatorSettings
from x402lab.money import atomic_to_usd, format_usd, usd_to_atomic

REPORT_HEADERS = ("x-402-payment", "x-payment", "payment-signature")
_MENU_FIELDS = ("id", "createdAt", "model", "postCount", "dateRange")
_SELECTS = ("all", "range")
PAYMENT_REQUIRED = "payment required: retry with an x402 payment in X-402-Payment"


class ReportError(Exception):
    """An error answer of the report service: status, code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.code, "message": self.message}, self.status)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return ReportError(status, code, message).response()


def _single(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ReportError(400, "invalid_query", f"{name} given {len(values)} times")
    return values[0] if values else None


def _iso_bound(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        raise ReportError(
            400, "invalid_query", f"{name} is not an ISO 8601 date or timestamp: {value[:40]!r}"
        ) from None
    return value.strip()


class ReportService:
    """The request handlers, over one library and one payment gate."""

    def __init__(self, settings: EmulatorSettings, chain: Chain) -> None:
        self.settings = settings
        self.library: Mapping[str, Handle] = build_library() if settings.kv_configured else {}
        self.unit_atomic = usd_to_atomic(settings.report_usd)
        self.gate = PaymentGate(
            settings,
            chain,
            service="reports",
            header_names=REPORT_HEADERS,
            accept_overpayment=True,
            required_error=PAYMENT_REQUIRED,
        )

    async def list_handles(self, request: Request) -> Response:
        """GET /api/intel/list: the shelf, newest first by gatheredAt."""
        entries = sorted(
            (dict(h.entry) for h in self.library.values()),
            key=lambda e: e["gatheredAt"],
            reverse=True,
        )
        return JSONResponse({"configured": self.settings.kv_configured, "entries": entries})

    async def reports(self, request: Request) -> Response:
        """GET /api/intel/reports: the free menu, or paid report bodies for select=all|range."""
        try:
            return await self._reports(request)
        except ReportError as exc:
            return exc.response()

    async def _reports(self, request: Request) -> Response:
        username = (_single(request, "username") or "").strip()
        select = _single(request, "select")
        ids_text = _single(request, "ids")
        since = _iso_bound("from", _single(request, "from"))
        until = _iso_bound("to", _single(request, "to"))
        if not username:
            raise ReportError(400, "invalid_query", "username is required")
        if select is not None and select not in _SELECTS:
            raise ReportError(
                400, "invalid_query", f"select must be all or range, got {select[:20]!r}"
            )
        ids = [part.strip() for part in (ids_text or "").split(",") if part.strip()]
        if select != "range" and (ids_text is not None or since or until):
            raise ReportError(400, "invalid_query", "ids, from and to apply to select=range only")
        # Handles are case-insensitive, and people paste them with the @.
        handle = self.library.get(username.lstrip("@").lower())
        if handle is None:
            raise ReportError(404, "unknown_handle", f"no reports for handle {username[:64]!r}")
        if select is None:
            menu = [{key: r[key] for key in _MENU_FIELDS} for r in handle.reports]
            body = {"username": handle.entry["username"], "reportCount": len(menu)}
            return JSONResponse({**body, "reports": menu})
        if select == "range" and not (ids or since or until):
            raise ReportError(
                400, "range_requires_from_to_or_ids", "select=range needs ids, from or to"
            )
        chosen = [
            r
            for r in handle.reports
            if (not ids or r["id"] in ids)
            and (since is None or r["createdAt"] >= since)
            and (until is None or r["createdAt"] <= until)
        ]
        if not chosen:
            raise ReportError(404, "no_matching_reports", "the range matched no report")
        return await self._sell(request, handle, select, chosen)

    def _first_party(self, request: Request) -> bool:
        secret = self.settings.library_secret
        header = request.headers.get("authorization", "")
        if not secret or not header.lower().startswith("bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), secret.encode())

    async def _sell(
        self, request: Request, handle: Handle, select: str, chosen: list[dict[str, Any]]
    ) -> Response:
        username = handle.entry["username"]

        def success(charged_atomic: int) -> JSONResponse:
            return JSONResponse(
                {
                    "username": username,
                    "select": select,
                    "reportCount": len(chosen),
                    "chargedUsd": atomic_to_usd(charged_atomic),
                    "reports": chosen,
                }
            )

        if self._first_party(request):
            return success(0)
        if not self.settings.settlement_configured:
            raise ReportError(
                501, "settlement_not_configured", "payments are not configured on this deployment"
            )
        price = self.unit_atomic * len(chosen)
        resource = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        extensions = {
            "chainId": self.gate.chain.token.chain_id,
            "tokenDecimals": self.gate.chain.token.decimals,
            "unitPriceUsd": self.settings.report_usd,
            "reportCount": len(chosen),
            "select": select,
            "resource": resource,
        }
        charge = await self.gate.charge(
            request,
            amount_atomic=price,
            description=f"{len(chosen)} intel report(s) for @{username}",
            extensions=extensions,
            challenge_body=self._challenge_body,
            on_refused=self._refused,
        )
        if charge.response is not None:
            return charge.response
        return self.gate.finish(success(price), charge)

    def _challenge_body(self, challenge: dict[str, Any]) -> dict[str, Any]:
        """The service's own 402 body for a standard challenge (same amount, payTo, extensions)."""
        entry = challenge["accepts"][0]
        error = challenge.get("error") or ""
        amount = int(entry["amount"])
        count = challenge["extensions"].get("reportCount")
        return {
            "x402Version": 2,
            "error": error,
            "message": _message(error, amount, count),
            "accepts": [
                {
                    "protocol": "x402",
                    "version": 2,
                    "network": entry["network"],
                    "asset": entry["asset"],
                    "amount": entry["amount"],
                    "payTo": entry["payTo"],
                }
            ],
            "extensions": dict(challenge["extensions"]),
        }

    def _refused(self, refusal: Refusal) -> Response | None:
        if refusal.reason == NONCE_ALREADY_USED:
            return _error(409, "payment_already_used", "this payment id was used before")
        if refusal.underpaid:
            challenge = dict(refusal.challenge, error="insufficient_payment")
            return self.gate.challenge_response(challenge, self._challenge_body)
        return None


def _message(error: str, amount: int, count: Any) -> str:
    price = f"{count} report(s) cost {format_usd(amount)}"
    if error == "insufficient_payment":
        return f"the payment is below the price: {price}"
    if error == PAYMENT_REQUIRED or not error:
        return f"payment required: {price}; pay with x402 and retry with X-402-Payment"
    return f"payment refused ({error}); {price}"


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        {"error": code, "message": exc.detail}, exc.status_code, headers=exc.headers
    )


def create_reports_app(settings: EmulatorSettings, chain: Chain) -> Starlette:
    """The report service as a Starlette app (``app.state.service`` holds the handlers)."""
    service = ReportService(settings, chain)
    app = Starlette(
        routes=[
            Route("/api/intel/list", service.list_handles, methods=["GET"]),
            Route("/api/intel/reports", service.reports, methods=["GET"]),
        ],
        middleware=service.gate.middleware(),
        exception_handlers={HTTPException: _http_error},
    )
    app.state.service = service
    app.state.gate = service.gate
    return app
