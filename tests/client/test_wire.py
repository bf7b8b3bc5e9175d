"""``Wire``: the lab's one httpx client answers what a plain httpx client answers, and
failures reach the callers as httpx's errors (which the retry and re-send rules read). Real
sockets on 127.0.0.1 throughout; ``tests/transport`` has the proxy, a caller's own client
and ``verify=``."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import certifi
import httpx
import pytest

from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings
from x402lab.errors import ConfigError
from x402lab.transport import Wire
from x402lab.transport.environment import ssl_context


@pytest.fixture(scope="module")
def gateway_url() -> Iterator[str]:
    emulator = start_emulator(EmulatorSettings())
    yield emulator.gateway_url
    emulator.stop()


def _both_ways(request_of: Callable[[Wire], httpx.Request]) -> tuple[httpx.Response, ...]:
    """The answer to the same request sent by the lab's Wire and by a plain httpx client."""

    async def run() -> tuple[httpx.Response, ...]:
        wire = Wire(timeout_s=10)
        try:
            ours = await wire.send(request_of(wire))
            async with httpx.AsyncClient(trust_env=False) as plain:
                theirs = await plain.send(request_of(wire))
            return ours, theirs
        finally:
            await wire.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/v1/models", None),  # free, JSON
        ("GET", "/llms.txt", None),  # free, text
        ("POST", "/api/v1/chat/completions", {"model": "zai-org-glm-4.7-flash",
                                              "messages": [{"role": "user", "content": "hi"}]}),
        ("GET", "/api/v1/no-such-route", None),  # an error answer
    ],
)  # fmt: skip
def test_the_wire_answers_what_plain_httpx_answers(gateway_url, method, path, body):
    url = httpx.URL(gateway_url + path)
    ours, theirs = _both_ways(lambda wire: wire.build_request(method, url, json=body))
    assert ours.status_code == theirs.status_code
    assert ours.content == theirs.content or path.endswith("completions")  # 402s differ in time
    drop = {"date", "payment-required"}
    assert {k: v for k, v in ours.headers.items() if k not in drop} == {
        k: v for k, v in theirs.headers.items() if k not in drop
    }
    assert ours.request.url == url and ours.is_stream_consumed


def _serve_once(handle: Callable[[socket.socket], None]) -> tuple[str, threading.Thread]:
    """A one-connection TCP server on 127.0.0.1 that runs ``handle`` on its connection."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def run() -> None:
        with server:
            connection, _ = server.accept()
            with connection:
                handle(connection)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{port}/", thread


def _send(url: str, timeout_s: float = 10) -> httpx.Response:
    async def run() -> httpx.Response:
        wire = Wire(timeout_s=timeout_s)
        try:
            return await wire.send(wire.build_request("POST", httpx.URL(url), json={"a": 1}))
        finally:
            await wire.aclose()

    return asyncio.run(run())


def _read_request(connection: socket.socket) -> None:
    data = b""
    while b'{"a":1}' not in data:
        data += connection.recv(65536)


def test_a_gzip_answer_is_decoded():
    body = b'{"answer": "unzipped"}'
    packed = gzip.compress(body)

    def answer(connection: socket.socket) -> None:
        _read_request(connection)
        connection.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            + f"content-length: {len(packed)}\r\n\r\n".encode()
            + packed
        )

    url, thread = _serve_once(answer)
    response = _send(url)
    thread.join(5)
    assert response.json() == {"answer": "unzipped"}
    assert response.headers["content-encoding"] == "gzip"


def test_a_cookie_an_answer_sets_is_kept_and_sent_back_as_httpx_does():
    # The wire reads cookies only from answers that set one (``wire._SetCookies``).
    seen: list[bytes] = []

    def answer(connection: socket.socket) -> None:
        for set_cookie in (b"set-cookie: session=abc; Path=/\r\n", b""):
            data = b""
            while b'{"a":1}' not in data:
                data += connection.recv(65536)
            seen.append(data)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + set_cookie
                + b"content-length: 2\r\n\r\n{}"
            )

    url, thread = _serve_once(answer)

    async def run() -> list[str]:
        wire = Wire(timeout_s=10)
        try:
            for _ in range(2):
                await wire.send(wire.build_request("POST", httpx.URL(url), json={"a": 1}))
            return [cookie.name for cookie in wire.client.cookies.jar]
        finally:
            await wire.aclose()

    assert asyncio.run(run()) == ["session"]
    thread.join(5)
    assert b"cookie: session=abc" not in seen[0].lower()
    assert b"cookie: session=abc" in seen[1].lower()


def test_a_refused_connection_is_an_httpx_connect_error():
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        _send(f"http://127.0.0.1:{port}/")


def test_a_connection_closed_without_an_answer_is_an_httpx_transport_error():
    url, thread = _serve_once(_read_request)  # reads the request, closes, never answers
    with pytest.raises(httpx.RemoteProtocolError):
        _send(url)
    thread.join(5)


def test_no_answer_in_time_is_an_httpx_read_timeout():
    done = threading.Event()

    def stall(connection: socket.socket) -> None:
        _read_request(connection)
        done.wait(10)

    url, thread = _serve_once(stall)
    with pytest.raises(httpx.ReadTimeout):
        _send(url, timeout_s=0.3)
    done.set()
    thread.join(5)


@pytest.mark.parametrize("header", [("Authorization", "Bearer s3cret\r\nX-Forged: 1"),
                                    ("X-Note\n", "fine")])  # fmt: skip
def test_a_header_with_a_line_break_is_a_config_error_that_hides_the_value(header):
    wire = Wire(timeout_s=7)
    url = httpx.URL("http://127.0.0.1:9/api/v1/chat/completions")
    for body in ({"json": {"a": 1}}, {}):
        with pytest.raises(ConfigError, match="line break") as raised:
            wire.build_request("POST", url, headers=dict([header]), **body)
        assert "s3cret" not in str(raised.value)


def test_labs_share_one_trust_store_until_its_setting_changes(tmp_path, monkeypatch):
    # Loading the certificates costs ~40 ms a lab: made once per process and setting.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    shared = ssl_context(True)
    assert ssl_context(True) is shared
    assert ssl_context(False) is not shared
    end = "-----END CERTIFICATE-----"
    certificates = Path(certifi.where()).read_text(encoding="ascii")
    bundle = tmp_path / "one-ca.pem"  # the first certificate of certifi's bundle
    bundle.write_text(certificates[: certificates.index(end) + len(end)] + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    own = ssl_context(True)
    assert own is not shared
    assert len(own.get_ca_certs()) == 1  # SSL_CERT_FILE read when it is set, as httpx does
    monkeypatch.delenv("SSL_CERT_FILE")
    assert ssl_context(True) is shared


class _PayOn402(httpx.Auth):
    """A caller's flow in the shape of the 402 handshake: sent again, with a header, after
    a 402 (the lab drives such flows itself, without httpx's send: ``transport.direct``)."""

    def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        response = yield request
        if response.status_code == 402:
            request.headers["payment-signature"] = "signed"
            yield request


def _two_answers(seen: list[bytes]) -> Callable[[socket.socket], None]:
    """A handler that reads two requests on one connection: a 402, then 200 with a cookie."""
    replies = (
        b"HTTP/1.1 402 Payment Required\r\ncontent-length: 2\r\n\r\n{}",
        b'HTTP/1.1 200 OK\r\nset-cookie: s=1; Path=/\r\ncontent-length: 8\r\n\r\n{"ok":1}',
    )

    def answer(connection: socket.socket) -> None:
        for reply in replies:
            data = b""
            while b'{"a":1}' not in data:
                data += connection.recv(65536)
            seen.append(data)
            connection.sendall(reply)

    return answer


def _header_lines(raw: bytes) -> list[bytes]:
    head = raw.split(b"\r\n\r\n")[0].lower().split(b"\r\n")[1:]
    return sorted(line for line in head if line.startswith((b"x-", b"payment", b"content")))


def _header_values(raw: bytes) -> dict[bytes, bytes]:
    values: dict[bytes, list[bytes]] = {}
    for line in _header_lines(raw):
        name, _, value = line.partition(b": ")
        values.setdefault(name, []).append(value)
    return {name: b", ".join(parts) for name, parts in values.items()}


def test_a_flow_the_wire_drives_sends_and_answers_what_httpx_does():
    # A repeated header and a UTF-8 one go out as httpx's client sends them.
    headers = httpx.Headers([("X-Twice", "1"), ("x-twice", "2"), ("X-Text", "é")], "utf-8")
    seen: dict[str, list[bytes]] = {"ours": [], "theirs": []}
    answers: dict[str, httpx.Response] = {}
    cookies: dict[str, dict[str, str]] = {}

    async def run() -> None:
        wire = Wire(timeout_s=10)
        try:
            for who in ("ours", "theirs"):
                url, thread = _serve_once(_two_answers(seen[who]))
                request = httpx.Request("POST", url, json={"a": 1}, headers=headers)
                if who == "ours":
                    answers[who] = await wire.send(request, auth=_PayOn402())
                    cookies[who] = dict(wire.client.cookies)
                else:
                    async with httpx.AsyncClient(trust_env=False) as plain:
                        answers[who] = await plain.send(request, auth=_PayOn402())
                        cookies[who] = dict(plain.cookies)
                thread.join(5)
        finally:
            await wire.aclose()

    asyncio.run(run())
    ours, theirs = answers["ours"], answers["theirs"]
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)
    assert ours.json() == {"ok": 1}
    assert [r.status_code for r in ours.history] == [r.status_code for r in theirs.history]
    assert [r.status_code for r in ours.history] == [402]
    assert ours.is_stream_consumed and ours.elapsed.total_seconds() > 0
    assert ours.history[0].content == b"{}" and ours.history[0].elapsed.total_seconds() > 0
    assert cookies["ours"] == cookies["theirs"] == {"s": "1"}
    # A repeated header goes as one line, its values joined (as httpx-aiohttp's transport
    # always sent it); httpx's own sends each: the same header either way.
    assert [_header_values(r) for r in seen["ours"]] == [_header_values(r) for r in seen["theirs"]]
    assert b"x-twice: 1, 2" in _header_lines(seen["ours"][0])
    assert b"payment-signature: signed" in seen["ours"][1].lower()


def test_a_body_that_stops_halfway_through_a_flow_is_an_httpx_read_timeout():
    # The whole answer's deadline still holds when its body has not all arrived.
    done = threading.Event()

    def stall(connection: socket.socket) -> None:
        _read_request(connection)
        connection.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{"a"')
        done.wait(10)

    url, thread = _serve_once(stall)

    async def run() -> None:
        wire = Wire(timeout_s=0.5)
        try:
            request = wire.build_request("POST", httpx.URL(url), json={"a": 1})
            await wire.send(request, auth=_PayOn402())
        finally:
            await wire.aclose()

    with pytest.raises(httpx.ReadTimeout, match="timeout_s=0.5"):
        asyncio.run(run())
    done.set()
    thread.join(5)
