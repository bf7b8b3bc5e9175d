"""A Base JSON-RPC endpoint, read with plain JSON-RPC 2.0 over httpx (no web3 at run time).

``ChainClient`` asks the USDC contract (EIP-3009) whether authorizations were used
(``authorizationState(address,bytes32)`` through ``eth_call``, batched) and finds the
transactions that used them (``AuthorizationUsed`` and ``Transfer`` logs through
``eth_getLogs``). Call data is ABI-encoded here by hand: every argument and result of these
calls is one 32-byte word.

Errors: an address that is not http(s) and an endpoint of another chain are ConfigError; an
endpoint that cannot be reached, answers an HTTP error, something that is not JSON-RPC, or a
JSON-RPC error, is TransportError. Nothing here writes anywhere.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from x402lab.errors import ConfigError, TransportError
from x402lab.payments.reconcile import UsedLog
from x402lab.x402.keccak import keccak

AUTHORIZATION_STATE = "0x" + keccak(b"authorizationState(address,bytes32)")[:4].hex()
AUTHORIZATION_USED = "0x" + keccak(b"AuthorizationUsed(address,bytes32)").hex()
TRANSFER = "0x" + keccak(b"Transfer(address,address,uint256)").hex()
#: Seconds per block on Base (OP Stack): a lower bound of the block a past moment was in.
BASE_BLOCK_TIME_S = 2
_HEX = re.compile(r"0x[0-9a-fA-F]*")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")


def word_of_bytes32(value: str) -> str:
    """A 32-byte value (0x-hex) as a word, lowercase."""
    return "0x" + value.lower().removeprefix("0x").rjust(64, "0")


#: A 20-byte address as a 32-byte word: padded on the left like any shorter value.
word_of_address = word_of_bytes32


def authorization_state_call(asset: str, payer: str, nonce: str) -> dict[str, str]:
    """The ``eth_call`` object of ``authorizationState(payer, nonce)`` on ``asset``."""
    data = AUTHORIZATION_STATE + word_of_address(payer)[2:] + word_of_bytes32(nonce)[2:]
    return {"to": asset, "data": data}


class ChainClient:
    """A JSON-RPC endpoint of the chain of ``network`` (default Base, eip155:8453).

    ``http``: an httpx client to send with, or a function returning the one to use now (a
    lab's: ``Session.wire``); when not given one is made (trusting ``verify``: an
    ``ssl.SSLContext``, or True for the environment's trust store; proxies from the
    environment, as httpx reads them), and closed by ``aclose``.
    ``batch_size``: requests per JSON-RPC batch; ``log_range``: blocks per ``eth_getLogs``.
    Raises ConfigError for an address that is not http(s).
    """

    def __init__(
        self,
        url: str,
        *,
        network: str = "eip155:8453",
        http: httpx.AsyncClient | Callable[[], httpx.AsyncClient] | None = None,
        timeout_s: float = 30.0,
        batch_size: int = 100,
        log_range: int = 10_000,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        url = (url or "").strip()
        if not _URL.fullmatch(url):
            raise ConfigError(
                f"chain_rpc_url must be an http(s) address of a JSON-RPC endpoint, got {url[:80]!r}"
            )
        prefix, _, chain = network.partition(":")
        if prefix != "eip155" or not chain.isdigit():
            raise ConfigError(f"network must be eip155:<chain id>, got {network!r}")
        self.url = url
        self.network = network
        self.chain_id = int(chain)
        self._http = http
        self._own_http = http is None
        self._timeout_s = timeout_s
        self._verify = verify
        self._batch_size = max(1, batch_size)
        self._log_range = max(1, log_range)
        self._checked = False
        self._ids = 0

    def __repr__(self) -> str:
        return f"ChainClient({self.url!r}, network={self.network!r})"

    # -- JSON-RPC ----------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=self._timeout_s, verify=self._verify, trust_env=True
            )
        return self._http if isinstance(self._http, httpx.AsyncClient) else self._http()

    async def aclose(self) -> None:
        """Close the HTTP client this object made (one it was given is left open)."""
        if self._own_http and isinstance(self._http, httpx.AsyncClient):
            await self._http.aclose()
            self._http = None

    async def _post(self, payload: Any) -> Any:
        try:
            response = await self._client().post(self.url, json=payload, timeout=self._timeout_s)
        except httpx.HTTPError as exc:
            raise TransportError(
                f"cannot reach the chain RPC at {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code != 200:
            raise TransportError(
                f"the chain RPC at {self.url} answered HTTP {response.status_code}:"
                f" {response.text[:200]!r}"
            )
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            raise TransportError(
                f"the chain RPC at {self.url} did not answer JSON: {response.text[:120]!r}"
                " (is it a JSON-RPC endpoint?)"
            ) from None

    async def call_many(self, requests: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        """The results of ``(method, params)`` requests, in order, in batches. Raises
        TransportError for a JSON-RPC error or an answer that is not JSON-RPC."""
        results: list[Any] = []
        for start in range(0, len(requests), self._batch_size):
            chunk = requests[start : start + self._batch_size]
            first = self._ids + 1
            self._ids += len(chunk)
            payload = [
                {"jsonrpc": "2.0", "id": first + i, "method": method, "params": params}
                for i, (method, params) in enumerate(chunk)
            ]
            answer = await self._post(payload if len(payload) > 1 else payload[0])
            answers = answer if isinstance(answer, list) else [answer]
            by_id = {a.get("id"): a for a in answers if isinstance(a, Mapping)}
            for i, (method, _) in enumerate(chunk):
                results.append(self._result(by_id.get(first + i), method))
        return results

    async def call(self, method: str, params: list[Any]) -> Any:
        """The result of one JSON-RPC request (see ``call_many``)."""
        return (await self.call_many([(method, params)]))[0]

    def _result(self, answer: Mapping[str, Any] | None, method: str) -> Any:
        if answer is None or answer.get("jsonrpc") != "2.0":
            raise TransportError(
                f"the chain RPC at {self.url} gave no JSON-RPC 2.0 answer to {method}"
            )
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, Mapping) else None
            message = error.get("message") if isinstance(error, Mapping) else error
            raise TransportError(
                f"the chain RPC at {self.url} refused {method}: {message} (code {code})"
            )
        if "result" not in answer:
            raise TransportError(f"the chain RPC at {self.url} answered {method} with no result")
        return answer["result"]

    def _quantity(self, value: Any, what: str) -> int:
        if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) < 3:
            raise TransportError(f"the chain RPC at {self.url} gave a bad {what}: {value!r:.80}")
        return int(value, 16)

    # -- the chain ---------------------------------------------------------------------------

    async def check(self) -> None:
        """Make sure the endpoint is the chain of ``network`` (``eth_chainId``); once.

        Raises ConfigError when it answers for another chain, TransportError when it cannot
        be asked.
        """
        if self._checked:
            return
        found = self._quantity(await self.call("eth_chainId", []), "chain id")
        if found != self.chain_id:
            raise ConfigError(
                f"the chain RPC at {self.url} is chain {found} ({hex(found)}), not"
                f" {self.network} ({hex(self.chain_id)}): give a {self.network} endpoint"
            )
        self._checked = True

    async def block_number(self) -> int:
        """The latest block number."""
        return self._quantity(await self.call("eth_blockNumber", []), "block number")

    async def authorization_states(
        self, asset: str, pairs: Sequence[tuple[str, str]]
    ) -> list[bool]:
        """Per ``(payer, nonce)``: whether the USDC contract at ``asset`` records that
        authorization as used (``authorizationState``), at the latest block."""
        await self.check()
        requests = [
            ("eth_call", [authorization_state_call(asset, payer, nonce), "latest"])
            for payer, nonce in pairs
        ]
        out = []
        for result in await self.call_many(requests):
            value = self._quantity(result, "authorizationState result")
            if value not in (0, 1):
                raise TransportError(
                    f"the chain RPC at {self.url} gave authorizationState {value}: not a bool"
                )
            out.append(bool(value))
        return out

    async def used_logs(
        self, asset: str, payer: str, nonces: Sequence[str], from_block: int, to_block: int
    ) -> dict[str, UsedLog]:
        """The transactions in ``[from_block, to_block]`` that used ``payer``'s
        authorizations ``nonces`` (lowercase nonce -> ``UsedLog``), from the contract's
        ``AuthorizationUsed`` logs and the ``Transfer`` logs of the same transactions."""
        await self.check()
        wanted = {word_of_bytes32(nonce) for nonce in nonces}
        payer_word = word_of_address(payer)
        found: dict[str, UsedLog] = {}
        amounts: dict[str, int] = {}
        start = max(0, from_block)
        while start <= to_block and len(found) < len(wanted):
            end = min(to_block, start + self._log_range - 1)
            query = {
                "address": asset,
                "fromBlock": hex(start),
                "toBlock": hex(end),
                "topics": [[AUTHORIZATION_USED, TRANSFER], payer_word],
            }
            logs = await self.call("eth_getLogs", [query])
            if not isinstance(logs, list):
                raise TransportError(f"the chain RPC at {self.url} gave eth_getLogs a non-list")
            for log in logs:
                self._read_log(log, wanted, found, amounts)
            start = end + 1
        return {
            nonce: UsedLog(log.tx_hash, log.block, amounts.get(log.tx_hash))
            for nonce, log in found.items()
        }

    def _read_log(
        self,
        log: Any,
        wanted: set[str],
        found: dict[str, UsedLog],
        amounts: dict[str, int],
    ) -> None:
        if not isinstance(log, Mapping) or log.get("removed"):
            return
        topics = log.get("topics")
        tx_hash = log.get("transactionHash")
        if not isinstance(topics, list) or not topics or not isinstance(tx_hash, str):
            return
        kind = str(topics[0]).lower()
        if kind == AUTHORIZATION_USED and len(topics) >= 3:
            nonce = str(topics[2]).lower()
            if nonce in wanted:
                block = self._quantity(log.get("blockNumber"), "log block number")
                found[nonce] = UsedLog(tx_hash, block)
        elif kind == TRANSFER:
            amounts[tx_hash] = amounts.get(tx_hash, 0) + self._quantity(
                log.get("data"), "transfer amount"
            )


#: The environment variable read when ``connect()`` gets no ``chain_rpc_url``.
CHAIN_RPC_ENV = "X402LAB_CHAIN_RPC_URL"


def chain_url_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """``X402LAB_CHAIN_RPC_URL`` when set and not empty, else None."""
    value = (os.environ if environ is None else environ).get(CHAIN_RPC_ENV, "").strip()
    return value or None
