"""The emulated chain as a Base JSON-RPC endpoint, over real HTTP at ``emulator.chain_url``.

Payments are made through the running services with real signatures; the chain is then read
only through JSON-RPC, with call data encoded and results decoded by ``eth_abi`` and selectors
and topics hashed here from their signatures, and once more through web3.py.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from eth_abi import decode, encode
from eth_hash.auto import keccak
from eth_utils import to_checksum_address
from support.gateway import receipt_of

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.codec import encode_header
from x402lab.x402.tokens import BASE_USDC

CHAT = "/api/v1/chat/completions"
HELLO = {
    "model": "zai-org-glm-4.7-flash",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}
USDC = BASE_USDC.address
TRANSFER = "0x" + keccak(b"Transfer(address,address,uint256)").hex()
AUTHORIZATION_USED = "0x" + keccak(b"AuthorizationUsed(address,bytes32)").hex()


def _selector(signature: str) -> bytes:
    return keccak(signature.encode())[:4]


def _word(address: str) -> str:
    return "0x" + encode(["address"], [address]).hex()


class Rpc:
    """A JSON-RPC 2.0 client on the endpoint (plain httpx, as the toolkit's client will be)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = 0

    def raw(self, payload: Any) -> httpx.Response:
        return httpx.post(self.url, json=payload, timeout=10)

    def answer(self, method: str, *params: Any) -> dict[str, Any]:
        self.ids += 1
        request = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": list(params)}
        response = self.raw(request)
        assert response.status_code == 200
        body = response.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == self.ids
        return body

    def __call__(self, method: str, *params: Any) -> Any:
        body = self.answer(method, *params)
        assert "error" not in body, body
        return body["result"]

    def error(self, method: str, *params: Any) -> dict[str, Any]:
        body = self.answer(method, *params)
        assert "result" not in body, body
        return body["error"]

    def call(self, signature: str, types: list[str], args: list[Any], block: Any = "latest"):
        data = "0x" + (_selector(signature) + encode(types, args)).hex()
        return self("eth_call", {"to": USDC, "data": data}, block)


@pytest.fixture
def rpc(emulator) -> Rpc:
    return Rpc(emulator.chain_url)


def _pay_chat(emulator, payer) -> dict[str, Any]:
    """One paid chat; its nonce, value, payer and the receipt's tx hash."""
    with httpx.Client(base_url=emulator.gateway_url) as client:
        unpaid = client.post(CHAT, json=HELLO)
        payment = payer.sign(unpaid.json())
        header = encode_header(payment.to_wire())
        paid = client.post(CHAT, json=HELLO, headers={"PAYMENT-SIGNATURE": header})
    assert paid.status_code == 200, paid.text
    auth = payment.authorization
    tx_hash = receipt_of(paid)["transaction"]
    return {"nonce": auth.nonce, "value": auth.value, "payer": auth.from_address, "tx": tx_hash}


def _pay_reports(emulator, payer) -> dict[str, Any]:
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        payment = payer.sign(client.get("/api/intel/reports", params=params).json())
        header = encode_header(payment.to_wire())
        paid = client.get("/api/intel/reports", params=params, headers={"X-Payment": header})
    assert paid.status_code == 200, paid.text
    auth = payment.authorization
    return {"nonce": auth.nonce, "value": auth.value, "payer": auth.from_address}


def test_chain_id_and_block_number(emulator, rpc, payer):
    assert rpc("eth_chainId") == "0x2105"
    assert int(rpc("eth_chainId"), 16) == 8453
    assert rpc("net_version") == "8453"
    assert rpc("eth_blockNumber") == "0x0"
    _pay_chat(emulator, payer)
    _pay_reports(emulator, payer)
    assert rpc("eth_blockNumber") == "0x2"


def test_each_settlement_has_a_block_a_tx_hash_and_two_logs(emulator, rpc, payer):
    paid = _pay_chat(emulator, payer)
    receipt = rpc("eth_getTransactionReceipt", paid["tx"])
    assert receipt["transactionHash"] == paid["tx"]
    assert receipt["status"] == "0x1" and receipt["blockNumber"] == "0x1"
    assert receipt["to"].lower() == USDC.lower()
    used, moved = receipt["logs"]
    assert [log["logIndex"] for log in (used, moved)] == ["0x0", "0x1"]
    for log in (used, moved):
        assert log["transactionHash"] == paid["tx"] and log["blockNumber"] == "0x1"
        assert log["blockHash"] == receipt["blockHash"] and log["address"].lower() == USDC.lower()
    # AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)
    assert used["topics"][0] == AUTHORIZATION_USED and used["data"] == "0x"
    [authorizer] = decode(["address"], bytes.fromhex(used["topics"][1][2:]))
    [nonce] = decode(["bytes32"], bytes.fromhex(used["topics"][2][2:]))
    assert to_checksum_address(authorizer) == to_checksum_address(paid["payer"])
    assert "0x" + nonce.hex() == paid["nonce"].lower()
    # Transfer(address indexed from, address indexed to, uint256 value)
    assert moved["topics"][0] == TRANSFER
    [sender] = decode(["address"], bytes.fromhex(moved["topics"][1][2:]))
    [receiver] = decode(["address"], bytes.fromhex(moved["topics"][2][2:]))
    [value] = decode(["uint256"], bytes.fromhex(moved["data"][2:]))
    assert to_checksum_address(sender) == to_checksum_address(paid["payer"])
    assert to_checksum_address(receiver) == to_checksum_address(RECEIVER_ADDRESS)
    assert value == paid["value"] > 0
    assert len(bytes.fromhex(receipt["logsBloom"][2:])) == 256


def test_eth_call_balance_of_and_authorization_state(emulator, rpc, payer):
    state = "authorizationState(address,bytes32)"

    def balance(address: str) -> int:
        result = rpc.call("balanceOf(address)", ["address"], [address])
        assert len(result) == 2 + 64
        return decode(["uint256"], bytes.fromhex(result[2:]))[0]

    # Test mode funds every address on first sight, the receiver too.
    assert balance(payer.address) == balance(RECEIVER_ADDRESS) == 100 * 10**6
    paid = _pay_chat(emulator, payer)
    assert balance(payer.address) == 100 * 10**6 - paid["value"]
    assert balance(RECEIVER_ADDRESS) == 100 * 10**6 + paid["value"]
    nonce = bytes.fromhex(paid["nonce"][2:])
    result = rpc.call(state, ["address", "bytes32"], [payer.address, nonce])
    assert len(bytes.fromhex(result[2:])) == 32 and decode(["bool"], bytes.fromhex(result[2:]))
    # Not yet used at genesis; never used for a fresh nonce or another authorizer.
    at_genesis = rpc.call(state, ["address", "bytes32"], [payer.address, nonce], "0x0")
    assert decode(["bool"], bytes.fromhex(at_genesis[2:])) == (False,)
    fresh = rpc.call(state, ["address", "bytes32"], [payer.address, secrets.token_bytes(32)])
    assert decode(["bool"], bytes.fromhex(fresh[2:])) == (False,)
    other = rpc.call(state, ["address", "bytes32"], [RECEIVER_ADDRESS, nonce])
    assert decode(["bool"], bytes.fromhex(other[2:])) == (False,)


def test_get_logs_filters_by_topics_blocks_and_address(emulator, rpc, payer, other_payer):
    first = _pay_chat(emulator, payer)
    second = _pay_reports(emulator, other_payer)
    everything = {"fromBlock": "earliest", "toBlock": "latest"}
    logs = rpc("eth_getLogs", everything)
    assert [(log["blockNumber"], log["topics"][0]) for log in logs] == [
        ("0x1", AUTHORIZATION_USED),
        ("0x1", TRANSFER),
        ("0x2", AUTHORIZATION_USED),
        ("0x2", TRANSFER),
    ]
    transfers = rpc("eth_getLogs", {**everything, "topics": [TRANSFER]})
    values = [decode(["uint256"], bytes.fromhex(log["data"][2:]))[0] for log in transfers]
    assert values == [first["value"], second["value"]]
    # by authorizer (topic 1) and by nonce (topic 2)
    mine = rpc("eth_getLogs", {**everything, "topics": [AUTHORIZATION_USED, _word(payer.address)]})
    assert [log["blockNumber"] for log in mine] == ["0x1"]
    nonce = "0x" + second["nonce"][2:].lower()
    by_nonce = rpc("eth_getLogs", {**everything, "topics": [None, None, nonce]})
    assert [(log["blockNumber"], log["topics"][0]) for log in by_nonce] == [
        ("0x2", AUTHORIZATION_USED)
    ]
    # alternatives in one position; the receiver as topic 2 of Transfer
    either = [_word(payer.address), _word(other_payer.address)]
    both = rpc("eth_getLogs", {**everything, "topics": [TRANSFER, either, _word(RECEIVER_ADDRESS)]})
    assert len(both) == 2
    # block ranges, the default range (the latest block) and a block hash
    assert len(rpc("eth_getLogs", {"fromBlock": "0x2", "toBlock": "0x2"})) == 2
    assert len(rpc("eth_getLogs", {"fromBlock": "0x0", "toBlock": "0x1"})) == 2
    assert [log["blockNumber"] for log in rpc("eth_getLogs", {})] == ["0x2", "0x2"]
    block_hash = logs[0]["blockHash"]
    assert rpc("eth_getLogs", {"blockHash": block_hash}) == logs[:2]
    # the contract's address, in any case, alone or in a list; another address has no logs
    assert rpc("eth_getLogs", {**everything, "address": USDC.lower()}) == logs
    assert rpc("eth_getLogs", {**everything, "address": [RECEIVER_ADDRESS, USDC]}) == logs
    assert rpc("eth_getLogs", {**everything, "address": RECEIVER_ADDRESS}) == []


def test_a_receipt_of_an_unknown_transaction_is_null(rpc):
    assert rpc("eth_getTransactionReceipt", "0x" + "ab" * 32) is None


def test_a_call_to_another_address_is_empty_and_an_unknown_selector_reverts(rpc):
    data = "0x" + (_selector("balanceOf(address)") + encode(["address"], [USDC])).hex()
    assert rpc("eth_call", {"to": RECEIVER_ADDRESS, "data": data}, "latest") == "0x"
    unknown = "0x" + (_selector("totalSupply()")).hex()
    assert rpc.error("eth_call", {"to": USDC, "data": unknown}, "latest")["code"] == -32000


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("eth_call", [{"data": "0x70a08231"}, "latest"]),
        ("eth_call", [{"to": USDC, "data": "0x70a0823100"}, "latest"]),
        ("eth_call", [{"to": USDC, "data": "zz"}, "latest"]),
        ("eth_call", [{"to": "0x1234", "data": "0x"}, "latest"]),
        ("eth_call", [{"to": USDC, "data": "0x70a08231"}, "yesterday"]),
        ("eth_call", []),
        ("eth_getLogs", [{"topics": "0x00"}]),
        ("eth_getLogs", [{"topics": ["0x1234"]}]),
        ("eth_getLogs", [{"fromBlock": 7}]),
        ("eth_getLogs", [{"blockHash": "0x" + "00" * 32, "fromBlock": "0x0"}]),
        ("eth_getLogs", []),
        ("eth_getTransactionReceipt", ["0x1234"]),
        ("eth_chainId", [1]),
    ],
)
def test_bad_params_are_invalid_params(rpc, method, params):
    error = rpc.error(method, *params)
    assert error["code"] == -32602 and error["message"].startswith("invalid params")


def test_a_block_past_the_tip_is_an_error(rpc):
    error = rpc.error("eth_getLogs", {"fromBlock": "0x0", "toBlock": "0x10"})
    assert error["code"] == -32000 and "past the tip" in error["message"]


def test_protocol_errors(rpc):
    assert rpc.error("eth_sendRawTransaction", "0x00")["code"] == -32601
    parse = httpx.post(rpc.url, content=b"{not json", timeout=10).json()
    assert parse == {"jsonrpc": "2.0", "id": None, "error": parse["error"]}
    assert parse["error"]["code"] == -32700
    for bad in ({"id": 1, "method": "eth_chainId"}, {"jsonrpc": "2.0", "id": 1}, [], 5):
        body = rpc.raw(bad).json()
        assert body["error"]["code"] == -32600, bad
    named = rpc.raw({"jsonrpc": "2.0", "id": 9, "method": "eth_chainId", "params": "x"}).json()
    assert named["id"] == 9 and named["error"]["code"] == -32600


def test_batches_are_answered_in_order_and_notifications_are_not(rpc):
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "eth_chainId"},
        {"jsonrpc": "2.0", "method": "eth_blockNumber"},  # a notification: no answer
        {"jsonrpc": "2.0", "id": "c", "method": "no_such_method"},
        {"jsonrpc": "2.0", "id": "d", "method": "eth_blockNumber", "params": []},
    ]
    answers = rpc.raw(batch).json()
    assert [a["id"] for a in answers] == ["a", "c", "d"]
    assert answers[0]["result"] == "0x2105" and answers[2]["result"] == "0x0"
    assert answers[1]["error"]["code"] == -32601
    only_notification = rpc.raw({"jsonrpc": "2.0", "method": "eth_chainId"})
    assert only_notification.status_code == 204 and only_notification.content == b""


def test_web3_reads_the_emulated_chain(emulator, payer):
    from web3 import Web3

    paid = _pay_chat(emulator, payer)
    w3 = Web3(Web3.HTTPProvider(emulator.chain_url))
    assert w3.eth.chain_id == 8453 and w3.eth.block_number == 1
    usdc = w3.eth.contract(address=USDC, abi=USDC_ABI)
    assert usdc.functions.balanceOf(payer.address).call() == 100 * 10**6 - paid["value"]
    nonce = bytes.fromhex(paid["nonce"][2:])
    assert usdc.functions.authorizationState(payer.address, nonce).call() is True
    [event] = usdc.events.Transfer().get_logs(from_block=0)
    assert event["args"]["value"] == paid["value"]
    assert event["args"]["from"] == to_checksum_address(payer.address)
    assert event["args"]["to"] == to_checksum_address(RECEIVER_ADDRESS)
    [used] = usdc.events.AuthorizationUsed().get_logs(from_block=0)
    assert used["args"]["nonce"] == nonce
    receipt = w3.eth.get_transaction_receipt(paid["tx"])
    assert receipt["status"] == 1 and receipt["blockNumber"] == 1


USDC_ABI = [
    {
        "type": "function",
        "name": "balanceOf",
        "stateMutability": "view",
        "inputs": [{"name": "account", "type": "address"}],
        "outputs": [{"name": "", "type": "uint256"}],
    },
    {
        "type": "function",
        "name": "authorizationState",
        "stateMutability": "view",
        "inputs": [
            {"name": "authorizer", "type": "address"},
            {"name": "nonce", "type": "bytes32"},
        ],
        "outputs": [{"name": "", "type": "bool"}],
    },
    {
        "type": "event",
        "name": "Transfer",
        "anonymous": False,
        "inputs": [
            {"name": "from", "type": "address", "indexed": True},
            {"name": "to", "type": "address", "indexed": True},
            {"name": "value", "type": "uint256", "indexed": False},
        ],
    },
    {
        "type": "event",
        "name": "AuthorizationUsed",
        "anonymous": False,
        "inputs": [
            {"name": "authorizer", "type": "address", "indexed": True},
            {"name": "nonce", "type": "bytes32", "indexed": True},
        ],
    },
]
