"""One paid gateway request: the model check, the request key, and the 402 paid once.

``PaidRequests.send`` is what every paid gateway route (``text``, ``images``, ``audio``,
``tools``, ``generic``), the media queue and batches send through.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from x402lab.money import usd_to_atomic
from x402lab.payments import CallInfo
from x402lab.routes import GATEWAY

if TYPE_CHECKING:
    from x402lab.gateway.catalog import Catalog
    from x402lab.session import Session
    from x402lab.transport import Reply


def request_key(method: str, path: str, body: Any) -> str:
    """A stable key of one logical request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()
    return digest[:32]


def _max_atomic(max_usd: float | None) -> int | None:
    return usd_to_atomic(max_usd) if max_usd is not None else None


class PaidRequests:
    """Sends paid gateway requests: checks the model id, keys the request, pays its 402 once."""

    def __init__(self, session: Session, catalog: Catalog) -> None:
        self._session = session
        self._catalog = catalog

    async def send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        model: str | None = None,
        max_usd: float | None = None,
        key: str | None = None,
        stream: bool = False,
        **request_kwargs: Any,
    ) -> Reply:
        """Spends money: one paid request (the model id is checked against the catalog)."""
        if model is not None:
            await self._catalog.check_model(model, path)
        if json_body is not None:
            request_kwargs["json"] = json_body
        call = CallInfo(
            service=GATEWAY,
            method=method.upper(),
            path=path,
            model=model,
            request_key=key or request_key(method, path, json_body),
            max_atomic=_max_atomic(max_usd),
        )
        return await self._session.client(GATEWAY).send(
            method.upper(), path, call=call, stream=stream, **request_kwargs
        )
