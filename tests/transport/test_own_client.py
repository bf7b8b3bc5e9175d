"""A caller's own ``httpx.AsyncClient`` carries every request of the lab and is left open;
``verify=`` a CA bundle makes an HTTPS service with a certificate of that CA trusted (the
lab's own requests and the clients it hands out alike). Real sockets on 127.0.0.1; TLS with
a throwaway CA (trustme)."""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
import sys
import threading
from urllib.parse import urlsplit

import httpx
import pytest
import trustme

import x402lab as xl
from x402lab._loop import run
from x402lab.errors import ConfigError, TransportError
from x402lab.ledger import Ledger, PaymentMeta, SignedAuthorization
from x402lab.routes import GATEWAY
from x402lab.transport import RetryPolicy

MODEL = "zai-org-glm-4.7-flash"


def test_a_callers_client_carries_every_request_and_is_not_closed(tmp_path):
    seen: list[httpx.URL] = []

    async def note(request: httpx.Request) -> None:
        seen.append(request.url)

    mine = httpx.AsyncClient(event_hooks={"request": [note]})
    with xl.connect(ledger=tmp_path / "ledger.sqlite", http_client=mine) as lab:
        lab.models()
        lab.chat("hello", model=MODEL, max_tokens=8)
        lab.chat_stream("stream it", model=MODEL, max_tokens=8).collect()
        lab.reconcile()  # the chain's JSON-RPC
        gateway, chain = urlsplit(lab.gateway_url).netloc, urlsplit(lab.chain_rpc_url).netloc
    paths = [url.path for url in seen if url.netloc.decode() == gateway]
    assert "/api/v1/models" in paths
    assert paths.count("/api/v1/chat/completions") >= 2  # the chat and the stream
    assert any(url.netloc.decode() == chain for url in seen)
    assert not mine.is_closed  # the lab closed its connections, not the caller's client
    run(mine.aclose())


class TlsServer:
    """An HTTPS server on 127.0.0.1 (certificate for "localhost") answering "ok" to every
    request on every connection."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._context = context
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                with self._context.wrap_socket(connection, server_side=True) as tls:
                    data = b""
                    while chunk := tls.recv(65536):
                        data += chunk
                        if b"\r\n\r\n" in data:
                            data = b""
                            tls.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            except OSError:  # ssl.SSLError included: the client refused the certificate
                return

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def tls_server():
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    server = TlsServer(context)
    yield server, ca
    server.close()


def _ask(lab: xl.Lab) -> str:
    """GET /ask through the lab's own HTTP stack (the gateway's service client)."""
    reply = run(lab.async_.session.client(GATEWAY).send("GET", "/ask"))
    return reply.response.text


def test_verify_a_ca_bundle_trusts_an_https_service(tls_server, tmp_path):
    server, ca = tls_server
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    options = {"wallet": xl.Wallet.create(), "retry": RetryPolicy(attempts=1)}
    with xl.connect(server.url, ledger=tmp_path / "a.sqlite", **options) as lab:
        with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
            _ask(lab)  # a CA nobody trusts
    with xl.connect(server.url, ledger=tmp_path / "b.sqlite", verify=str(bundle), **options) as lab:
        assert _ask(lab) == "ok"
        with lab.http_client() as handed_out:  # the clients handed out trust it too
            assert handed_out.get("/ask").text == "ok"


def test_verify_an_unreadable_ca_bundle_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a readable CA bundle"):
        xl.connect(ledger=tmp_path / "ledger.sqlite", verify=str(tmp_path / "missing.pem"))


def _leave_an_orphan(path) -> None:
    """A signed payment row whose sender has exited (what a crash leaves for connect())."""
    code = "from x402lab.ledger import process_owner; print(process_owner())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    ledger = Ledger(path)
    signed = SignedAuthorization(nonce="0x" + "ab" * 32, payer="0x" + "11" * 20, valid_before=2**40)
    row = ledger.reserve(
        budget="default", cap_atomic=None, amount_atomic=10_000,
        meta=PaymentMeta(service=GATEWAY), sign=lambda: signed,
    )  # fmt: skip
    ledger.db.write_one("UPDATE payments SET owner = ? WHERE id = ?", (dead.strip(), row))
    ledger.close()


def test_verify_reaches_the_chain_check_at_connect(tls_server, tmp_path, caplog):
    server, ca = tls_server
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    ledger = tmp_path / "ledger.sqlite"
    _leave_an_orphan(ledger)
    options = {"wallet": xl.Wallet.create(), "ledger": ledger, "chain_rpc_url": server.url}
    with caplog.at_level(logging.WARNING, logger="x402lab"):
        xl.connect(server.url, **options).close()
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text  # a CA nobody trusts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="x402lab"):
        xl.connect(server.url, verify=str(bundle), **options).close()
    # The TLS handshake passed with the lab's CA: the server's "ok" is no JSON-RPC answer.
    assert "did not answer JSON" in caplog.text and "CERTIFICATE" not in caplog.text
