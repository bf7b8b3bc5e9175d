"""A hostile service for tests: a real HTTP server on 127.0.0.1 in front of the emulator, whose
misbehaviour each test sets (``Hostile.attack``), as the emulator's faults are settings.

It forwards every request to the emulator (so prices, challenges, receipts and the chain are
real) and keeps every payment it is handed (``Hostile.payments``): a hostile server keeps the
authorizations it refuses and may settle them later, so ``valid_atomic()`` (the sum of
distinct, correctly signed, still valid authorizations it received) is what it could take.

What an ``Attack`` can do to the answers of the paths starting with ``path``:

- ``refuse_prepayments``: the first paid send of each distinct request (method, path, body)
  is answered with the fresh 402 the emulator gives that request unpaid (the authorization is
  kept); later paid sends of it are forwarded and settle.
- ``status`` with ``body_bytes``: an answer of that status and a junk body of that size
  (chunked, no Content-Length, of ``content_type``: JSON unless set), sent ``chunk_bytes`` at
  a time every ``trickle_s`` seconds;
  a 402 carries no challenge header, so the client must read the body to find one. Without
  ``status``, ``body_bytes`` replaces the body of the emulator's own answer (its status and
  headers kept: a paid answer keeps its receipt).
- ``paid_only``: the attack touches only requests that carry a payment.
- ``nesting``: a 200 JSON answer nested that deep (``[[[...]]]``).
- ``redirect_to``: a 302 to that address.
- ``receipt``: fields of the emulator's PAYMENT-RESPONSE replaced (another payer,
  transaction or network) on a settled answer.
- ``challenge``: fields of each ``accepts`` entry of the emulator's 402 replaced (an amount
  of 26 digits).
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.eip712 import authorization_digest
from x402lab.x402.models import PaymentPayload, PaymentRequirements
from x402lab.x402.tokens import token_for
from x402lab.x402.verify import recover_address

_HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "keep-alive", "date", "server"}
PAYMENT_HEADERS = ("payment-signature", "x-402-payment", "x-payment")


@dataclasses.dataclass
class Attack:
    path: str = "/"
    paid_only: bool = False
    refuse_prepayments: bool = False
    status: int | None = None
    body_bytes: int = 0
    chunk_bytes: int = 1 << 16
    trickle_s: float = 0.0
    content_type: str = "application/json"
    nesting: int = 0
    redirect_to: str | None = None
    receipt: dict[str, Any] | None = None
    challenge: dict[str, Any] | None = None


class Hostile:
    """The server's state: the attacks set, and the payments received."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.attacks: list[Attack] = []
        self.payments: list[dict[str, Any]] = []
        self.url = ""
        self._refused: set[tuple[str, str, bytes]] = set()
        #: The paid requests refused with a fresh 402 (method, path, headers, body): what
        #: ``settle_refused`` sends the emulator later.
        self.kept: list[tuple[str, str, dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=60)

    def attack(self, **settings: Any) -> Attack:
        """Add an attack (``Attack``'s fields); the newest one matching a path wins."""
        found = Attack(**settings)
        self.attacks.append(found)
        return found

    def attack_on(self, path: str) -> Attack | None:
        matching = [a for a in self.attacks if path.startswith(a.path)]
        return matching[-1] if matching else None

    def valid_atomic(self, now: float | None = None) -> int:
        """The sum of the distinct, correctly signed authorizations received that are still
        inside their window: what this server could still settle or has settled."""
        moment = int(time.time() if now is None else now)
        seen: dict[str, int] = {}
        for wire in self.payments:
            payload = PaymentPayload.from_wire(wire)
            auth = payload.authorization
            accepted = PaymentRequirements.from_wire(payload.accepted)
            token = token_for(accepted.network, accepted.asset)
            assert token is not None
            signer = recover_address(authorization_digest(token, auth), payload.signature)
            if signer.lower() == auth.from_address.lower() and auth.valid_before > moment:
                seen[auth.nonce] = auth.value
        return sum(seen.values())

    def settle_refused(self) -> list[int]:
        """Do what a hostile server can: send the emulator the paid requests it refused, so
        their authorizations settle after all; returns the emulator's status codes."""
        codes = []
        for method, path, headers, body in self.kept:
            answer = self._client.request(
                method, self.upstream + path, headers=headers, content=body
            )
            codes.append(answer.status_code)
        return codes

    def close(self) -> None:
        self._client.close()


def _handler(hostile: Hostile) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            # The Host header is kept: the emulator names its own addresses (a video's
            # download_url) after this server's, as behind any reverse proxy.
            paid = next((headers[k] for k in headers if k.lower() in PAYMENT_HEADERS), None)
            if paid is not None:
                with hostile._lock:
                    hostile.payments.append(decode_header(paid))
            attack = hostile.attack_on(self.path) or Attack()
            if attack.paid_only and paid is None:
                attack = Attack()
            if attack.redirect_to is not None:
                return self._answer(302, {"Location": attack.redirect_to}, b"")
            if attack.status is not None:
                return self._junk(attack, attack.status, {})
            if paid is not None and attack.refuse_prepayments:
                key = (self.command, self.path, body)
                with hostile._lock:
                    first = key not in hostile._refused
                    hostile._refused.add(key)
                if first:  # the same request unpaid: its fresh 402
                    with hostile._lock:
                        hostile.kept.append((self.command, self.path, headers, body))
                    unpaid = {k: v for k, v in headers.items() if k.lower() not in PAYMENT_HEADERS}
                    return self._forward(unpaid, body, attack)
            if attack.nesting:
                deep = b"[" * attack.nesting + b"]" * attack.nesting
                return self._answer(200, {"Content-Type": "application/json"}, deep)
            self._forward(headers, body, attack)

        def _forward(self, headers: dict[str, str], body: bytes, attack: Attack) -> None:
            url = hostile.upstream + self.path
            answer = hostile._client.request(self.command, url, headers=headers, content=body)
            out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
            if attack.receipt and "payment-response" in answer.headers:
                receipt = decode_header(answer.headers["payment-response"])
                receipt.update(attack.receipt)
                out = {k: v for k, v in out.items() if k.lower() != "payment-response"}
                out["PAYMENT-RESPONSE"] = encode_header(receipt)
            if attack.challenge and "payment-required" in answer.headers:
                challenge = decode_header(answer.headers["payment-required"])
                for entry in challenge["accepts"]:
                    entry.update(attack.challenge)
                out = {k: v for k, v in out.items() if k.lower() != "payment-required"}
                out["PAYMENT-REQUIRED"] = encode_header(challenge)
            if attack.body_bytes:
                kept = {k: v for k, v in out.items() if k.lower() != "content-type"}
                return self._junk(attack, answer.status_code, kept)
            self._answer(answer.status_code, out, answer.content)

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _junk(self, attack: Attack, status: int, headers: dict[str, str]) -> None:
            """A junk body of ``attack.body_bytes``, chunked, trickled when asked."""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", attack.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            left = attack.body_bytes
            chunk = b"x" * attack.chunk_bytes
            try:
                while left > 0:
                    part = chunk[: min(left, attack.chunk_bytes)]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    left -= len(part)
                    if attack.trickle_s:
                        self.wfile.flush()
                        time.sleep(attack.trickle_s)
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up: what it should do

    return Handler


@contextlib.contextmanager
def hostile_server(upstream: str) -> Iterator[Hostile]:
    """A hostile server in front of ``upstream`` on a free port of 127.0.0.1 (``.url``)."""
    hostile = Hostile(upstream)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(hostile))
    server.daemon_threads = True
    hostile.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hostile
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        hostile.close()
