"""``SendTurn``: a batch's requests leave one at a time, each before the next one's work
starts, instead of in a burst after all of their work; on a thread busy nearly all the time
the turn steps aside. The lab's real ``Wire`` sends to a real HTTP server on
127.0.0.1 that runs in threads of its own and notes when each request arrived. The turn goes
with each request explicitly, in its extensions, as ``ServiceClient`` sends it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.http_server import QuietHandler, serving

from x402lab.busy import WINDOW_S as BUSY_WINDOW_S
from x402lab.transport import Wire
from x402lab.transport.turn import SendTurn, carrying, holding

WORK_S = 0.02  # each request's own work before it is sent (signing, the ledger), simulated
REQUESTS = 6


class _Handler(QuietHandler):
    """Notes when each request arrived, by its ``n``."""

    protocol_version = "HTTP/1.1"  # keep-alive: the connections opened first are reused

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _ARRIVED[json.loads(body)["n"]] = time.perf_counter()
        self.reply(b"{}", "application/json")


_ARRIVED: dict[int, float] = {}  # each request's arrival, by its ``n`` (one test at a time)


@pytest.fixture
def server() -> Iterator[str]:
    """The server's URL; ``_ARRIVED`` empty."""
    _ARRIVED.clear()
    with serving(_Handler) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"


def _send_all(url: str, turn: SendTurn | None) -> dict[int, float]:
    """Each request's work started (perf_counter), for ``REQUESTS`` requests made ready
    together, each doing ``WORK_S`` of work and then sending, with or without ``turn``."""
    started: dict[int, float] = {}

    async def one(wire: Wire, n: int) -> None:
        async def send(held: Any = None) -> None:
            started[n] = time.perf_counter()
            time.sleep(WORK_S)  # the request's own work, which holds the event loop
            request = wire.build_request("POST", url, json={"n": n}, extensions=carrying(held))
            response = await wire.send(request)
            assert response.status_code == 200

        if turn is None:
            await send()
            return
        async with turn.take() as held:
            assert holding(held)
            await send(held)
            assert not holding(held)  # the wire passed it on once the request was handed over

    async def run() -> None:
        wire = Wire(timeout_s=10)
        try:
            # Open the connections first, as a batch's earlier requests have (a request on a
            # new connection leaves once it is connected, whoever holds the turn then).
            warm = [wire.build_request("POST", url, json={"n": -1 - n}) for n in range(REQUESTS)]
            await asyncio.gather(*(wire.send(request) for request in warm))
            await asyncio.gather(*(one(wire, n) for n in range(REQUESTS)))
        finally:
            await wire.aclose()

    asyncio.run(run())
    for n in range(-REQUESTS, 0):
        del _ARRIVED[n]
    return started


def test_with_the_turn_each_request_arrives_before_the_next_ones_work_starts(server):
    started = _send_all(server, SendTurn())
    arrived = _ARRIVED
    assert sorted(arrived) == list(range(REQUESTS))
    order = sorted(started, key=started.get)
    for this, after in zip(order, order[1:], strict=False):
        # Its bytes left before the next one's work began; the server's thread notes them
        # once it gets the interpreter, early in that work.
        assert arrived[this] < started[after] + WORK_S / 2, (this, after)


def test_without_it_the_requests_leave_in_a_burst_after_all_their_work(server):
    started = _send_all(server, None)
    # None arrives before the last one started its work: they all left together after it.
    assert min(_ARRIVED.values()) > max(started.values())


@pytest.mark.parametrize(("busy_max", "held"), [(0.05, [False, False]), (1.01, [True, True])])
def test_a_thread_busy_over_the_bound_sends_without_the_turn(busy_max, held):
    # The bound is the test's: a thread that only computes is busy over 5% of the time
    # however loaded the machine is, and never over 101%.
    turn = SendTurn(busy_max=busy_max)

    async def run() -> list[bool]:
        end = time.perf_counter() + 2 * BUSY_WINDOW_S
        while time.perf_counter() < end:  # the loop's thread computes without a pause
            pass
        seen: list[bool] = []

        async def one() -> None:
            async with turn.take() as held:
                seen.append(holding(held))
                await asyncio.sleep(0.01)

        await asyncio.gather(one(), one())
        return seen

    assert asyncio.run(run()) == held
    assert 0.05 < turn.busy <= 1.01
