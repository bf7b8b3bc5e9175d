"""The emulated chain as a Base JSON-RPC endpoint (JSON-RPC 2.0 over HTTP POST at ``/``).

Methods: ``eth_chainId`` (0x2105), ``net_version``, ``eth_blockNumber``, ``eth_call`` on the
USDC contract (``balanceOf(address)``, ``authorizationState(address,bytes32)``),
``eth_getLogs`` (the ``AuthorizationUsed`` and ``Transfer`` logs of every settlement;
``fromBlock``/``toBlock``/``blockHash``, ``address`` and ``topics`` filters) and
``eth_getTransactionReceipt``. Batches (a JSON array of requests) are answered in order.

Readings: ``authorizationState`` honours the block it is asked at (a nonce is used from the
block that settled it); ``balanceOf`` reads the latest state at any block, and funds a payer
seen for the first time in test mode, like the payment gate does. A call to another address
returns ``0x`` (no code there); an unknown selector reverts. Errors follow JSON-RPC 2.0:
-32700 parse error, -32600 invalid request, -32601 unknown method, -32602 bad params,
-32000 execution reverted or a block past the tip.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from x402lab.emulator import chain_abi as abi
from x402lab.emulator.chain import SETTLER_ADDRESS, Chain, Transfer
from x402lab.x402.keccak import keccak

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_ERROR = -32000
MAX_BATCH = 100
# What a transferWithAuthorization costs on Base, roughly; the emulator charges no gas.
_GAS_USED = 86_000
_BLOCK_TAGS = ("latest", "pending", "safe", "finalized", "earliest")


class RpcError(Exception):
    """A JSON-RPC error object: ``code`` and ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _bad(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"invalid params: {message}")


def _hex(value: int) -> str:
    return hex(value)


def _hex_bytes(value: Any, size: int, name: str) -> str:
    """``value`` as lowercase 0x-hex of exactly ``size`` bytes. Raises RpcError."""
    if not isinstance(value, str) or value[:2] not in ("0x", "0X"):
        raise _bad(f"{name} must be 0x-hex")
    text = value[2:]
    if len(text) != size * 2:
        raise _bad(f"{name} must be {size} bytes")
    try:
        bytes.fromhex(text)
    except ValueError:
        raise _bad(f"{name} must be 0x-hex") from None
    return "0x" + text.lower()


def _params(params: Any, low: int, high: int) -> list[Any]:
    if params is None:
        params = []
    if not isinstance(params, list):
        raise _bad("params must be an array")
    if not low <= len(params) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise _bad(f"expected {expected} params, got {len(params)}")
    return params


class ChainRpc:
    """The JSON-RPC methods over one Chain."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.usdc = chain.token.address.lower()
        self.methods: dict[str, Callable[[Any], Any]] = {
            "eth_chainId": self.chain_id,
            "net_version": self.net_version,
            "eth_blockNumber": self.block_number,
            "eth_call": self.call,
            "eth_getLogs": self.get_logs,
            "eth_getTransactionReceipt": self.transaction_receipt,
        }

    # -- blocks ------------------------------------------------------------------------------

    def _block(self, tag: Any, name: str = "block") -> int:
        """A block number from a tag or a hex quantity; raises RpcError past the tip."""
        latest = self.chain.block_number()
        if tag is None or tag in ("latest", "pending", "safe", "finalized"):
            return latest
        if tag == "earliest":
            return 0
        if isinstance(tag, dict):
            if "blockHash" in tag:
                return self._block_by_hash(tag["blockHash"])
            return self._block(tag.get("blockNumber"), name)
        if not isinstance(tag, str) or tag[:2] not in ("0x", "0X"):
            raise _bad(f"{name} must be a hex number or one of {', '.join(_BLOCK_TAGS)}")
        try:
            number = int(tag[2:], 16)
        except ValueError:
            raise _bad(f"{name} is not a hex number: {tag[:20]!r}") from None
        if number > latest:
            raise RpcError(SERVER_ERROR, f"header not found: block {number} is past the tip")
        return number

    def _block_by_hash(self, value: Any) -> int:
        wanted = _hex_bytes(value, 32, "blockHash")
        for number in range(self.chain.block_number() + 1):
            if self.chain.block_hash(number) == wanted:
                return number
        raise RpcError(SERVER_ERROR, f"unknown block {wanted}")

    # -- methods -----------------------------------------------------------------------------

    def chain_id(self, params: Any) -> str:
        _params(params, 0, 0)
        return _hex(self.chain.token.chain_id)

    def net_version(self, params: Any) -> str:
        _params(params, 0, 0)
        return str(self.chain.token.chain_id)

    def block_number(self, params: Any) -> str:
        _params(params, 0, 0)
        return _hex(self.chain.block_number())

    def call(self, params: Any) -> str:
        """eth_call [{to, data|input, ...}, block?]: the ABI-encoded result, 0x-hex."""
        call, *rest = _params(params, 1, 3)
        if not isinstance(call, dict):
            raise _bad("the call must be an object")
        block = self._block(rest[0] if rest else None)
        to = _hex_bytes(call.get("to"), 20, "to")
        data = call.get("input", call.get("data", "0x"))
        if not isinstance(data, str):
            raise _bad("data must be 0x-hex")
        if to != self.usdc:
            return "0x"  # no contract code at that address
        try:
            selector, words = abi.split_call(data)
            if selector == abi.BALANCE_OF_SELECTOR and len(words) == 1:
                return abi.word_of_uint(self.chain.balance_of(abi.address_arg(words[0])))
            if selector == abi.AUTHORIZATION_STATE_SELECTOR and len(words) == 2:
                used = self.chain.used_at(abi.address_arg(words[0]), abi.bytes32_arg(words[1]))
                return abi.word_of_bool(used is not None and used <= block)
        except abi.AbiError as exc:
            raise _bad(str(exc)) from None
        raise RpcError(SERVER_ERROR, "execution reverted")

    def get_logs(self, params: Any) -> list[dict[str, Any]]:
        """eth_getLogs [filter]: the settlements' logs in the range that match the filter."""
        [query] = _params(params, 1, 1)
        if not isinstance(query, dict):
            raise _bad("the filter must be an object")
        if "blockHash" in query:
            if "fromBlock" in query or "toBlock" in query:
                raise _bad("blockHash excludes fromBlock and toBlock")
            first = last = self._block_by_hash(query["blockHash"])
        else:
            first = self._block(query.get("fromBlock"), "fromBlock")
            last = self._block(query.get("toBlock"), "toBlock")
        addresses = query.get("address")
        if addresses is not None:
            listed = addresses if isinstance(addresses, list) else [addresses]
            wanted = {_hex_bytes(a, 20, "address") for a in listed}
            if self.usdc not in wanted:
                return []
        topics = _topic_filter(query.get("topics"))
        logs = []
        for number in range(max(first, 1), last + 1):
            transfer = self.chain.transfer_in_block(number)
            if transfer is None:
                continue
            logs += [log for log in self._logs(transfer) if _matches(log["topics"], topics)]
        return logs

    def transaction_receipt(self, params: Any) -> dict[str, Any] | None:
        """eth_getTransactionReceipt [hash]: the receipt, or null for an unknown hash."""
        [value] = _params(params, 1, 1)
        transfer = self.chain.transfer_by_hash(_hex_bytes(value, 32, "transaction hash"))
        if transfer is None:
            return None
        logs = self._logs(transfer)
        return {
            "transactionHash": transfer.tx_hash,
            "transactionIndex": "0x0",
            "blockHash": self.chain.block_hash(transfer.block_number),
            "blockNumber": _hex(transfer.block_number),
            "from": SETTLER_ADDRESS,
            "to": self.usdc,
            "cumulativeGasUsed": _hex(_GAS_USED),
            "gasUsed": _hex(_GAS_USED),
            "effectiveGasPrice": "0x0",
            "contractAddress": None,
            "logs": logs,
            "logsBloom": _bloom(logs),
            "status": "0x1",
            "type": "0x2",
        }

    def _logs(self, transfer: Transfer) -> list[dict[str, Any]]:
        """AuthorizationUsed then Transfer, in the order USDC's transferWithAuthorization
        emits them."""
        where = {
            "address": self.usdc,
            "blockNumber": _hex(transfer.block_number),
            "blockHash": self.chain.block_hash(transfer.block_number),
            "transactionHash": transfer.tx_hash,
            "transactionIndex": "0x0",
            "removed": False,
        }
        used = [
            abi.AUTHORIZATION_USED_TOPIC,
            abi.word_of_address(transfer.payer),
            "0x" + transfer.nonce.lower().removeprefix("0x").rjust(64, "0"),
        ]
        moved = [
            abi.TRANSFER_TOPIC,
            abi.word_of_address(transfer.payer),
            abi.word_of_address(transfer.pay_to),
        ]
        return [
            {**where, "topics": used, "data": "0x", "logIndex": "0x0"},
            {
                **where,
                "topics": moved,
                "data": abi.word_of_uint(transfer.amount_atomic),
                "logIndex": "0x1",
            },
        ]


def _topic_filter(value: Any) -> list[set[str] | None]:
    """eth_getLogs ``topics``: per position null (any), one topic, or a list of topics."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 4:
        raise _bad("topics must be an array of at most 4 entries")
    out: list[set[str] | None] = []
    for position, entry in enumerate(value):
        name = f"topics[{position}]"
        if entry is None:
            out.append(None)
        elif isinstance(entry, list):
            out.append({_hex_bytes(t, 32, name) for t in entry if t is not None} or None)
        else:
            out.append({_hex_bytes(entry, 32, name)})
    return out


def _matches(topics: list[str], wanted: list[set[str] | None]) -> bool:
    """True when every non-null position of the filter holds one of its topics."""
    for position, allowed in enumerate(wanted):
        if allowed is None:
            continue
        if position >= len(topics) or topics[position] not in allowed:
            return False
    return True


def _bloom(logs: list[dict[str, Any]]) -> str:
    """The 2048-bit logs bloom of ``logs`` (address and topics), as the yellow paper says."""
    bits = 0
    for log in logs:
        for item in (log["address"], *log["topics"]):
            digest = keccak(bytes.fromhex(item[2:]))
            for i in (0, 2, 4):
                bits |= 1 << (int.from_bytes(digest[i : i + 2], "big") & 2047)
    return "0x" + bits.to_bytes(256, "big").hex()


def _answer(rpc: ChainRpc, request: Any) -> dict[str, Any] | None:
    """The response object for one request (None for a notification)."""
    if not isinstance(request, dict):
        return _error(None, INVALID_REQUEST, "invalid request: not an object")
    ident = request.get("id")
    if not (ident is None or (isinstance(ident, int | str) and not isinstance(ident, bool))):
        return _error(None, INVALID_REQUEST, "invalid request: id must be a number or string")
    method = request.get("method")
    if request.get("jsonrpc") != "2.0" or not isinstance(method, str):
        return _error(ident, INVALID_REQUEST, "invalid request: want jsonrpc '2.0' and a method")
    params = request.get("params")
    if params is not None and not isinstance(params, list | dict):
        return _error(ident, INVALID_REQUEST, "invalid request: params must be an array")
    handler = rpc.methods.get(method)
    try:
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"the method {method[:60]} does not exist")
        result = handler(params)
    except RpcError as exc:
        answer = _error(ident, exc.code, exc.message)
    else:
        answer = {"jsonrpc": "2.0", "id": ident, "result": result}
    return answer if "id" in request else None


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def create_chain_app(chain: Chain) -> Starlette:
    """The JSON-RPC endpoint of ``chain`` as an ASGI app (POST ``/``)."""
    rpc = ChainRpc(chain)

    async def endpoint(request: Request) -> Response:
        try:
            payload = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse(_error(None, PARSE_ERROR, "parse error: the body is not JSON"))
        if isinstance(payload, list):
            if not payload or len(payload) > MAX_BATCH:
                message = f"invalid request: a batch holds 1 to {MAX_BATCH} requests"
                return JSONResponse(_error(None, INVALID_REQUEST, message))
            answers = [a for a in (_answer(rpc, item) for item in payload) if a is not None]
            return JSONResponse(answers) if answers else Response(status_code=204)
        answer = _answer(rpc, payload)
        return JSONResponse(answer) if answer is not None else Response(status_code=204)

    app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])
    app.state.rpc = rpc
    return app
