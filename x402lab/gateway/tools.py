"""Paid augment and crypto routes: web search, scraping, document parsing and JSON-RPC."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from x402lab import routes
from x402lab._loop import warn
from x402lab.errors import ConfigError, EmptyDocumentWarning
from x402lab.gateway.paid import PaidRequests
from x402lab.gateway.replies import text_result
from x402lab.gateway.results import RpcResult, SearchResult, TextResult
from x402lab.gateway.uploads import Binary, form_key, form_value, read_binary, upload_name


class Tools:
    """``search``, ``scrape``, ``parse_document`` and ``rpc``."""

    def __init__(self, paid: PaidRequests) -> None:
        self._paid = paid

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> SearchResult:
        """Spends money: a web search. Returns a SearchResult (``results``, ``to_pandas()``).

        ``params`` are checked against the route's published request schema before anything
        is signed; ``extra_body`` adds fields it does not list, unchecked."""
        body: dict[str, Any] = {"query": query, **params}
        if limit is not None:
            body["limit"] = limit
        path = routes.SEARCH
        reply = await self._paid.post_json(
            path, body, ("query", "limit"), max_usd, extra_body, rebuy=rebuy
        )
        return SearchResult(path, reply.json(), reply.cost, None, "application/json")

    async def scrape(
        self,
        url: str,
        *,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> TextResult:
        """Spends money: one web page as markdown text."""
        path = routes.SCRAPE
        reply = await self._paid.post_json(
            path, {"url": url, **params}, ("url",), max_usd, extra_body, rebuy=rebuy
        )
        return text_result(path, reply, None, "content")

    async def parse_document(
        self,
        document: Binary,
        *,
        filename: str | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        **params: Any,
    ) -> TextResult:
        """Spends money: the text of a document (PDF, DOCX, text), uploaded as multipart.

        Warns with EmptyDocumentWarning when a document that is not empty comes back with no
        text (a scanned PDF has no text layer): it was paid for all the same."""
        data = read_binary(document)
        name = upload_name(document, filename, "document")
        path = routes.TEXT_PARSER
        form = {k: form_value(v) for k, v in params.items()}
        reply = await self._paid.send(
            "POST",
            path,
            max_usd=max_usd,
            key=form_key(path, {**form, "filename": name}, data),
            data=form,
            files={"file": (name, data)},
            rebuy=rebuy,
        )
        result = text_result(path, reply, None, "text")
        if data.strip() and not result.text.strip():
            warn(
                f"parse_document({name!r}): the document ({len(data):,} bytes) came back with"
                " no text: a scanned PDF has no text layer, or the parser does not read the"
                f" format. It was paid ({result.cost.amount_usd if result.cost else '?'} USD).",
                EmptyDocumentWarning,
            )
        return result

    async def rpc(
        self,
        network: str,
        method: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        id: int | str = 1,
        max_usd: float | None = None,
        reuse: bool = False,
    ) -> RpcResult:
        """Spends money: one JSON-RPC call on ``network`` (an id from ``lab.rpc_networks()``).

        Returns an RpcResult (``result``, or ``error``: a JSON-RPC error is paid too). A
        chain read is live: it is paid each time, unless ``reuse=True`` (then an identical
        call stored before answers it again, paying nothing, as other paid calls do).
        """
        if not network or "/" in network:
            raise ConfigError(f"not a network id: {network!r} (see lab.rpc_networks())")
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
        body["params"] = list(params or [])
        if isinstance(params, Mapping):
            body["params"] = dict(params)
        path = f"{routes.RPC_PREFIX}{network}"
        reply = await self._paid.send(
            "POST",
            path,
            json_body=body,
            max_usd=max_usd,
            caller="rpc()",
            own=tuple(body),
            reuse=reuse,
        )
        credits = reply.response.headers.get("x-rpc-credits")
        return RpcResult(
            path,
            reply.json(),
            reply.cost,
            None,
            "application/json",
            credits=int(credits) if credits and credits.isdigit() else None,
        )
