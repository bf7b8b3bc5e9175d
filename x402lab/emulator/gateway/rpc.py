"""Simulated crypto JSON-RPC nodes behind /api/v1/crypto/rpc/{network}.

Answers are deterministic for a seed (balances, hashes), except block numbers, which grow with
the clock as a real chain's do. Method tiers follow the upstream price rules: standard 1x,
advanced 2x (trace_*, debug_*, txpool_inspect/status), large 4x (trace replays,
txpool_content, Solana getLargestAccounts/getSupply). Stateful filters and subscriptions are
refused, since the proxy is plain HTTP.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from x402lab.emulator.gateway import media

RPC_TIER = {"standard": 1, "advanced": 2, "large": 4}
_LARGE = {
    "trace_replayBlockTransactions",
    "trace_replayTransaction",
    "txpool_content",
    "getLargestAccounts",
    "getSupply",
}
_UNSUPPORTED_PREFIXES = (
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
    "eth_subscribe",
    "eth_unsubscribe",
)
_GENESIS = 1_700_000_000


def rpc_unsupported(method: str) -> bool:
    """Stateful filter and WebSocket-only methods, which the HTTP proxy refuses (400)."""
    return method in _UNSUPPORTED_PREFIXES or method.endswith(("Subscribe", "Unsubscribe"))


def rpc_tier(method: str) -> int:
    if method in _LARGE or method.startswith("arbtrace_replay"):
        return RPC_TIER["large"]
    if method.startswith(("trace_", "debug_", "arbtrace_")) or method in (
        "txpool_inspect",
        "txpool_status",
    ):
        return RPC_TIER["advanced"]
    return RPC_TIER["standard"]


class RpcNode:
    """Deterministic answers of one simulated chain."""

    def __init__(self, seed: int, network: dict[str, Any]) -> None:
        self.seed = seed
        self.network = network

    def block_number(self) -> int:
        # Grows with the clock (2 s blocks), from a seed-dependent start.
        start = 20_000_000 + int.from_bytes(media.seed_bytes(self.seed, self.network["slug"])[:2])
        return start + max(0, int(time.time()) - _GENESIS) // 2

    def answers(self, method: str) -> bool:
        """True when the node answers ``method`` with a result (else a JSON-RPC error)."""
        return self._result(method, []) is not None

    def _balance(self, address: object) -> int:
        return int.from_bytes(media.seed_bytes(self.seed, "balance", str(address).lower())[:8]) % (
            10**20
        )

    def _result(self, method: str, params: list[Any]) -> Any:
        chain_id = self.network.get("chainId")
        if self.network.get("family") == "solana":
            slot = 300_000_000 + self.block_number() % 10**6
            table: dict[str, Any] = {
                "getSlot": slot,
                "getBlockHeight": slot - 20_000,
                "getBalance": {
                    "context": {"slot": slot},
                    "value": self._balance(params[0] if params else "") % 10**12,
                },
                "getLatestBlockhash": {
                    "context": {"slot": slot},
                    "value": {
                        "blockhash": hashlib.sha256(str(slot).encode()).hexdigest()[:44],
                        "lastValidBlockHeight": slot - 19_850,
                    },
                },
                "getVersion": {"solana-core": "2.1.0", "feature-set": 1},
                "getHealth": "ok",
                "getSupply": {
                    "context": {"slot": slot},
                    "value": {
                        "total": 590_000_000 * 10**9,
                        "circulating": 480_000_000 * 10**9,
                        "nonCirculating": 110_000_000 * 10**9,
                        "nonCirculatingAccounts": [],
                    },
                },
            }
            return table.get(method)
        block = self.block_number()
        if method == "eth_chainId":
            return hex(int(chain_id or 1))
        if method == "net_version":
            return str(chain_id or 1)
        if method == "eth_blockNumber":
            return hex(block)
        if method == "web3_clientVersion":
            return "x402lab-emulator/1.0"
        if method == "eth_gasPrice":
            return hex(1_000_000_000 + self.seed % 1000)
        if method == "eth_getBalance":
            return hex(self._balance(params[0] if params else ""))
        if method == "eth_getTransactionCount":
            return hex(self._balance(params[0] if params else "") % 500)
        if method == "eth_getCode":
            return "0x"
        if method == "eth_call":
            return "0x" + "0" * 64
        if method == "eth_estimateGas":
            return hex(21000)
        if method == "eth_getLogs":
            return []
        if method == "eth_sendRawTransaction":
            raw = params[0] if params else ""
            return "0x" + hashlib.sha256(str(raw).encode()).hexdigest()
        if method in ("txpool_status", "txpool_inspect", "txpool_content"):
            return (
                {"pending": "0x0", "queued": "0x0"}
                if method == "txpool_status"
                else {"pending": {}, "queued": {}}
            )
        if method in ("debug_traceTransaction", "trace_transaction", "trace_block"):
            return (
                []
                if method.startswith("trace_")
                else {"gas": 21000, "failed": False, "returnValue": "", "structLogs": []}
            )
        if method in ("trace_replayTransaction", "trace_replayBlockTransactions"):
            return {"output": "0x", "trace": [], "stateDiff": None, "vmTrace": None}
        if method == "eth_getBlockByNumber":
            number = block
            if params and isinstance(params[0], str) and params[0].startswith("0x"):
                number = int(params[0], 16) if len(params[0]) > 2 else block
            digest = hashlib.sha256(f"{self.network['slug']}:{number}".encode()).hexdigest()
            return {
                "number": hex(number),
                "hash": "0x" + digest,
                "timestamp": hex(_GENESIS + number * 2),
                "transactions": [],
            }
        return None

    def call(self, item: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC 2.0 answer to one request object."""
        raw = item.get("params")
        params: list[Any] = raw if isinstance(raw, list) else []
        result = self._result(str(item.get("method")), params)
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": item.get("id")}
        if result is None:
            answer["error"] = {
                "code": -32601,
                "message": "the method does not exist / is not available",
            }
        else:
            answer["result"] = result
        return answer
