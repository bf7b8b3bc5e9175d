"""Paying httpx clients, and openai-python clients built on them, for the lab's gateway.

``PayingClients`` is the resource behind ``lab.http_client()``, ``lab.async_http_client()``,
``lab.openai()`` and ``lab.async_openai()``. Every client it makes pays through the lab's one
payer (budget, per-call cap, pinned payee, ledger, request keys) with ``GatewayAuth``.

The model-id check reads the gateway's free catalog through a ``Catalog`` of the client's own
(on a session of its own, opened on first use and closed with the client): a sync client
runs it on the helper loop thread, an async client on the loop that drives it, so no client
ever touches another loop's connections.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from x402lab._loop import run
from x402lab.gateway import Catalog
from x402lab.integrations.auth import GatewayAuth
from x402lab.routes import GATEWAY
from x402lab.session import Session

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

#: What openai-python needs as an API key; the gateway is paid per request and reads none.
PLACEHOLDER_KEY = "x402-paid-per-request"
OPENAI_PATH = "/api/v1"

C = TypeVar("C", "PayingClient", "AsyncPayingClient")


class ModelCheck:
    """The model-id check of one client, on a catalog and session of its own."""

    def __init__(self, lab_session: Session, lab_catalog: Catalog) -> None:
        self._lab_session = lab_session
        self._lab_catalog = lab_catalog
        self._session: Session | None = None
        self._catalog: Catalog | None = None

    async def check(self, model: str, path: str) -> None:
        """Raise ModelNotFound for an id the catalog does not hold (or of another type than
        ``path`` takes); nothing when the lab's ``validate_models`` is off."""
        if not self._lab_catalog.validate_models:
            return
        if self._catalog is None:
            self._session = Session(
                gateway_url=self._lab_session.url(GATEWAY),
                reports_url=None,
                payer=self._lab_session.payer,
                verify=self._lab_session.verify,
                http_client=self._lab_session.own_http_client,
            )
            self._catalog = Catalog(self._session)
        await self._catalog.check_model(model, path)

    def check_sync(self, model: str, path: str) -> None:
        run(self.check(model, path))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.aclose()
            self._session = None
            self._catalog = None


def _close_on_helper(check: ModelCheck) -> None:
    try:
        run(check.aclose())
    except Exception:  # noqa: BLE001 - best effort at garbage collection or exit
        pass


class PayingClient(httpx.Client):
    """An ``httpx.Client`` whose requests to the gateway are paid through the lab."""

    def __init__(self, check: ModelCheck, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._check = check
        self._finalizer = weakref.finalize(self, _close_on_helper, check)

    def close(self) -> None:
        super().close()
        self._finalizer()

    def __exit__(self, *exc: Any) -> None:  # httpx's own exit does not call close()
        super().__exit__(*exc)
        self._finalizer()


class AsyncPayingClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose requests to the gateway are paid through the lab."""

    def __init__(self, check: ModelCheck, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._check = check

    async def aclose(self) -> None:
        await super().aclose()
        await self._check.aclose()

    async def __aexit__(self, *exc: Any) -> None:  # httpx's own exit does not call aclose()
        await super().__aexit__(*exc)
        await self._check.aclose()


def _need_openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ImportError(
            "lab.openai() needs openai-python: pip install 'x402lab[openai]'"
            " (or pip install openai)"
        ) from None
    return openai


class PayingClients:
    """Clients of other libraries that pay the gateway through the lab."""

    def __init__(self, session: Session, catalog: Catalog) -> None:
        self._session = session
        self._catalog = catalog

    def _client(self, cls: type[C], timeout_s: float, httpx_options: dict[str, Any]) -> C:
        check = ModelCheck(self._session, self._catalog)
        gateway = self._session.url(GATEWAY)
        return cls(
            check,
            base_url=gateway,
            auth=GatewayAuth(
                self._session.payer, gateway, check=check.check_sync, acheck=check.check
            ),
            timeout=httpx_options.pop("timeout", timeout_s),
            **{**self._session.http_options(), **httpx_options},
        )

    def _openai(self, make: Any, http_client: Any, openai_options: dict[str, Any]) -> Any:
        return make(
            base_url=self._session.url(GATEWAY) + OPENAI_PATH,
            api_key=openai_options.pop("api_key", PLACEHOLDER_KEY),
            http_client=http_client,
            **openai_options,
        )

    def http_client(self, *, timeout_s: float = 120.0, **httpx_options: Any) -> httpx.Client:
        """Spends money on paid routes: an ``httpx.Client`` on the gateway, paying through the lab.

        Its ``base_url`` is the gateway; paid requests use the lab's budget, ledger, pinned
        payee, model-id check and request keys (a retry of the same request sends its unknown
        payment's same signed payload again; nothing is signed twice).

        ``httpx_options`` go to ``httpx.Client`` (``headers``, ``limits``...); by default it
        trusts what the lab trusts (``verify``) and honours the environment's proxies as the
        lab does (its own pool: a sync client cannot share the lab's async one). Close it (or
        use it as a context manager) when done. Money errors are x402lab's own exceptions.
        """
        return self._client(PayingClient, timeout_s, httpx_options)

    def async_http_client(
        self, *, timeout_s: float = 120.0, **httpx_options: Any
    ) -> httpx.AsyncClient:
        """Spends money on paid routes: the ``httpx.AsyncClient`` twin of ``http_client()``.

        Use it on one event loop and ``await client.aclose()`` when done.
        """
        return self._client(AsyncPayingClient, timeout_s, httpx_options)

    def openai(self, **openai_options: Any) -> OpenAI:
        """Spends money on paid calls: an ``openai.OpenAI`` client on the gateway, paid by the lab.

        It runs on ``http_client()``: ``client.chat.completions.create(...)``, streaming,
        ``client.embeddings.create(...)``.

        openai-python's own retries (timeouts, 429, 5xx; ``max_retries``) re-send the same
        signed payment of a request whose first answer was ambiguous, never a new one.
        ``openai_options`` go to ``openai.OpenAI`` (``max_retries``, ``timeout``...). Raises
        ImportError naming the extra to install when openai is missing.
        """
        make = _need_openai().OpenAI
        return self._openai(make, self.http_client(), openai_options)  # type: ignore[no-any-return]

    def async_openai(self, **openai_options: Any) -> AsyncOpenAI:
        """Spends money on paid calls: the ``openai.AsyncOpenAI`` twin of ``openai()``.

        It runs on ``async_http_client()``.
        """
        make = _need_openai().AsyncOpenAI
        return self._openai(make, self.async_http_client(), openai_options)  # type: ignore[no-any-return]
