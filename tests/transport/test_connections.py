"""The lab's own HTTP/1.1 connections (``transport.connections``), as ``Wire`` uses them for
every request sent whole: kept connections are reused, every way of framing an answer is
read whole, and each failure is the httpx error the retry and re-send rules read. Real
sockets on 127.0.0.1, served by scripted threads; TLS with a throwaway CA (trustme)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable

import httpx
import pytest
import trustme

from x402lab.transport import Wire

REQUEST = b'{"a":1}'


class Server:
    """A TCP server on 127.0.0.1 whose every accepted connection runs ``handle``; counts
    the connections it accepted."""

    def __init__(
        self, handle: Callable[[socket.socket], None], tls: ssl.SSLContext | None = None
    ) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self._handle, self._tls = handle, tls
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            threading.Thread(target=self._run, args=(connection,), daemon=True).start()

    def _run(self, connection: socket.socket) -> None:
        with connection:
            if self._tls is not None:
                try:
                    connection = self._tls.wrap_socket(connection, server_side=True)
                except OSError:  # ssl.SSLError included: the client refused the certificate
                    return
            with connection:
                try:
                    self._handle(connection)
                except OSError:
                    pass

    def url(self, scheme: str = "http") -> str:
        host = "localhost" if scheme == "https" else "127.0.0.1"
        return f"{scheme}://{host}:{self.port}/ask"

    def close(self) -> None:
        self._listener.close()


def read_request(connection: socket.socket) -> bytes:
    data = b""
    while not data.endswith(REQUEST):
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data


def answer(body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def keep_answering(connection: socket.socket) -> None:
    while read_request(connection):
        connection.sendall(answer())


async def _sends(url: str, times: int, wire: Wire) -> list[httpx.Response]:
    return [await wire.send(wire.build_request("POST", httpx.URL(url), json={"a": 1}))
            for _ in range(times)]  # fmt: skip


def send(url: str, times: int = 1, timeout_s: float = 10) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        wire = Wire(timeout_s=timeout_s)
        try:
            return await _sends(url, times, wire)
        finally:
            await wire.aclose()

    return asyncio.run(run())


def close_after_each(connection: socket.socket) -> None:
    read_request(connection)
    connection.sendall(answer(extra=b"connection: close\r\n"))


@pytest.mark.parametrize(
    ("handle", "connections"),
    [(keep_answering, 1), (close_after_each, 4)],  # kept, or closed as the answer asks
)
def test_a_connection_is_kept_unless_the_answer_asks_to_close_it(handle, connections):
    server = Server(handle)
    responses = send(server.url(), times=4)
    server.close()
    assert [r.text for r in responses] == ["ok"] * 4
    assert server.accepted == connections


def test_an_idle_connection_the_server_closed_is_replaced():
    def one_then_close(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(answer())
        # then closed by leaving the handler: idle on the client's side

    server = Server(one_then_close)

    async def run() -> list[httpx.Response]:
        wire = Wire(timeout_s=10)
        try:
            first = await _sends(server.url(), 1, wire)
            await asyncio.sleep(0.2)  # the close reaches the client while the connection idles
            return first + await _sends(server.url(), 1, wire)
        finally:
            await wire.aclose()

    responses = asyncio.run(run())
    server.close()
    assert [r.text for r in responses] == ["ok", "ok"]
    assert server.accepted == 2


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
         b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", b"abcdefg"),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", b"until the end"),  # ends with the connection
        (b"HTTP/1.1 100 Continue\r\n\r\n" + answer(b"after 100"), b"after 100"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
)  # fmt: skip
def test_every_framing_of_an_answer_is_read_whole(raw, body):
    def reply(connection: socket.socket) -> None:
        read_request(connection)
        for start in range(0, len(raw), 5):  # in small pieces
            connection.sendall(raw[start : start + 5])

    server = Server(reply)
    (response,) = send(server.url())
    server.close()
    assert response.content == body


def test_the_request_goes_out_as_http_1_1_with_its_headers_and_body():
    seen: list[bytes] = []

    def record(connection: socket.socket) -> None:
        seen.append(read_request(connection))
        connection.sendall(answer())

    server = Server(record)
    send(server.url())
    server.close()
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /ask HTTP/1.1"
    headers = {k.lower(): v for k, _, v in (line.partition(b": ") for line in lines[1:])}
    assert headers[b"host"] == f"127.0.0.1:{server.port}".encode()
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"content-length"] == str(len(REQUEST)).encode()
    assert body == REQUEST


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent():
    server = Server(keep_answering)

    async def run() -> None:
        wire = Wire(timeout_s=10)
        try:
            request = wire.build_request("POST", httpx.URL(server.url()), json={"a": 1})
            request.headers["x-note"] = "one\r\nx-forged: two"
            await wire.send(request)
        finally:
            await wire.aclose()

    with pytest.raises(httpx.LocalProtocolError, match="CR or LF"):
        asyncio.run(run())
    server.close()
    assert server.accepted == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part", "disconnected"),
        (b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: ws\r\n\r\n",
         "switched protocols"),
    ],
)  # fmt: skip
def test_a_malformed_cut_or_upgraded_answer_is_a_remote_protocol_error(raw, message):
    def reply(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(raw)

    server = Server(reply)
    with pytest.raises(httpx.RemoteProtocolError, match=message):
        send(server.url())
    server.close()


def test_a_cancelled_exchange_drops_its_connection():
    release = threading.Event()
    first = threading.Lock()

    def slow_first(connection: socket.socket) -> None:
        read_request(connection)
        if first.acquire(blocking=False):  # the first connection's answer comes too late
            release.wait(10)
            connection.sendall(answer(b"late"))
        connection.sendall(answer())
        keep_answering(connection)

    server = Server(slow_first)

    async def run() -> str:
        wire = Wire(timeout_s=10)
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await _sends(server.url(), 1, wire)
            # A late answer on that connection must not be read as the next one's.
            (again,) = await _sends(server.url(), 1, wire)
            return again.text
        finally:
            release.set()
            await wire.aclose()

    assert asyncio.run(run()) == "ok"
    server.close()
    assert server.accepted == 2


def test_more_requests_than_connections_wait_for_a_free_one():
    server = Server(keep_answering)

    async def run() -> list[httpx.Response]:
        wire = Wire(timeout_s=10, max_connections=2)
        try:
            requests = [wire.build_request("POST", httpx.URL(server.url()), json={"a": 1})
                        for _ in range(12)]  # fmt: skip
            return await asyncio.gather(*(wire.send(r) for r in requests))
        finally:
            await wire.aclose()

    responses = asyncio.run(run())
    server.close()
    assert [r.text for r in responses] == ["ok"] * 12
    assert server.accepted == 2


def test_no_free_connection_in_time_is_an_httpx_pool_timeout():
    release = threading.Event()

    def stall(connection: socket.socket) -> None:
        read_request(connection)
        release.wait(10)

    server = Server(stall)

    async def run() -> None:
        wire = Wire(timeout_s=0.3, max_connections=1)
        try:
            requests = [wire.build_request("POST", httpx.URL(server.url()), json={"a": 1})
                        for _ in range(2)]  # fmt: skip
            outcomes = await asyncio.gather(*(wire.send(r) for r in requests),
                                            return_exceptions=True)  # fmt: skip
            kinds = sorted(type(outcome).__name__ for outcome in outcomes)
            assert kinds == ["PoolTimeout", "ReadTimeout"]
        finally:
            release.set()
            await wire.aclose()

    asyncio.run(run())
    server.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _tls_server(ca: trustme.CA) -> Server:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    return Server(keep_answering, tls=context)


def test_https_verifies_the_server_against_the_default_trust_store(ca, tmp_path, monkeypatch):
    server = _tls_server(ca)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        send(server.url("https"))  # a CA nobody trusts
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # as OpenSSL reads it for any client
    responses = send(server.url("https"), times=3)
    server.close()
    assert [r.text for r in responses] == ["ok"] * 3
    assert server.accepted == 2  # the refused one, then one kept connection


def test_a_head_request_goes_the_aiohttp_way_and_reads_no_body():
    def head(connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n")

    server = Server(head)

    async def run() -> httpx.Response:
        wire = Wire(timeout_s=10)
        try:
            return await wire.send(wire.build_request("HEAD", server.url()))
        finally:
            await wire.aclose()

    response = asyncio.run(run())
    server.close()
    assert response.status_code == 200 and response.content == b""
