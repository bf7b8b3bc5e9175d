"""Serving ASGI apps on real sockets in a background thread (the emulator's plumbing).

``BackgroundServers`` binds every port in the caller's thread (port 0 picks a free one, read
back before anything starts), then serves the apps with uvicorn on one event loop in one
daemon thread, and returns from ``start`` once all of them listen; ``stop`` wakes them at
once (uvicorn alone looks for a stop every 0.1 s: a test suite starts and stops hundreds of
emulators). The emulator, its chain endpoint and the stand-in facilitator all run on it. It
knows nothing of the services.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Sequence

import uvicorn
from starlette.types import ASGIApp

_START_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 10.0
_SHUTDOWN_POLL_S = 0.005


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
    # protocol says TCP, and without it every keep-alive answer waits ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(False)
    return sock


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The emulator's event loop: uvloop's where it is installed (a dependency except on
    Windows), else asyncio's. With uvicorn's httptools parser (also a dependency, picked up
    by ``http="auto"``) it cuts the emulator's CPU per paid request from about 1.5 ms to
    1.0 ms: in a benchmark the emulator shares the machine with the clients it serves."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _Server(uvicorn.Server):
    """uvicorn's server, stopping as soon as it is clean to: its wait for a stop is an event
    ``wake`` sets from any thread (uvicorn sleeps 0.1 s between looks at ``should_exit``), and
    its shutdown waits for the open connections and requests to end by looking every 5 ms
    (uvicorn pauses 0.1 s first, then looks every 0.1 s)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._woken = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            # on_tick refreshes the Date header when counter % 10 == 0: once a second here.
            counter = (counter + 10) % 864000
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 1.0)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's steps, in its order: stop accepting, ask every connection to close once
        # its answer is sent, wait for them and their requests (cancelled after the graceful
        # timeout), then the app's lifespan shutdown.
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        grace = self.config.timeout_graceful_shutdown
        deadline = time.monotonic() + (grace if grace is not None else float("inf"))
        while (state.connections or state.tasks) and not self.force_exit:
            if time.monotonic() > deadline:
                for task in state.tasks:
                    task.cancel(msg="the emulator is stopping")
                break
            await asyncio.sleep(_SHUTDOWN_POLL_S)
        if not self.force_exit:
            await self.lifespan.shutdown()

    def wake(self) -> None:
        """Have the server look at ``should_exit`` now (callable from any thread)."""
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(woken.set)


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class BackgroundServers:
    """Several ASGI apps served by uvicorn on one event loop in one daemon thread.

    The constructor binds every socket (raising OSError if a port is taken); ``start``
    returns once all servers listen (raises RuntimeError if one fails); ``stop`` is idempotent.
    """

    def __init__(self, apps: Sequence[tuple[ASGIApp, int]], *, host: str = "127.0.0.1") -> None:
        self.host = host
        self._sockets: list[socket.socket] = []
        try:
            for _, port in apps:
                self._sockets.append(_bind(host, port))
        except OSError:
            self._close_sockets()
            raise
        self.ports = [sock.getsockname()[1] for sock in self._sockets]
        self.urls = [_url(host, port) for port in self.ports]
        self._servers = [
            _Server(
                uvicorn.Config(
                    app,
                    # No logging.config.dictConfig of uvicorn's own per server: it rewrote the
                    # loggers of the process the emulator is embedded in (a notebook's), and
                    # was a third of an emulator's start. Its warnings still reach stderr.
                    log_config=None,
                    log_level="warning",
                    access_log=False,
                    ws="none",
                    lifespan="auto",
                    # Streaming responses must not hold up a stop for long.
                    timeout_graceful_shutdown=2,
                )
            )
            for app, _ in apps
        ]
        self._thread = threading.Thread(target=self._run, name="x402lab-emulator", daemon=True)
        self._error: BaseException | None = None

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()

    def _run(self) -> None:
        loop = new_event_loop()
        try:
            loop.run_until_complete(self._serve_all())
        except BaseException as exc:  # reported to the starting thread by start()
            self._error = exc
        finally:
            loop.close()
            self._close_sockets()

    async def _serve_all(self) -> None:
        await asyncio.gather(
            *(
                server.serve(sockets=[sock])
                for server, sock in zip(self._servers, self._sockets, strict=True)
            )
        )

    def start(self, timeout: float = _START_TIMEOUT_S) -> BackgroundServers:
        """Start serving; returns self once every server listens. Raises RuntimeError."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not all(server.started for server in self._servers):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"emulator servers did not start: {self._error!r}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> None:
        """Ask every server to exit and wait for the thread (force-closing after timeout)."""
        for server in self._servers:
            server.should_exit = True
            server.wake()
        if self._thread.is_alive():
            self._thread.join(timeout / 2)
            if self._thread.is_alive():
                for server in self._servers:
                    server.force_exit = True
                    server.wake()
                self._thread.join(timeout / 2)
        elif not self._thread.ident:
            self._close_sockets()

    @property
    def running(self) -> bool:
        """True while the server thread runs."""
        return self._thread.is_alive()
