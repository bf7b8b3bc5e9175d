"""A private event loop on a background thread, shared by every sync ``Lab`` of the process.

This is how the sync API works in scripts, in Jupyter cells (whose loop is already running)
and inside other running loops, without patching any loop globally.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def helper_loop() -> asyncio.AbstractEventLoop:
    """The helper loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            _thread = threading.Thread(target=serve, name="x402lab-loop", daemon=True)
            _thread.start()
            ready.wait()
            _loop = loop
        return _loop


def in_helper_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the helper loop; returns a thread-safe future."""
    return asyncio.run_coroutine_threadsafe(coro, helper_loop())


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code and return its result.

    Works whether or not an event loop is running in this thread (as in Jupyter). A
    KeyboardInterrupt while waiting cancels the coroutine and waits (up to 5 s) for it to
    unwind; a coroutine that ends its cancellation with ``CancelledError(interrupt)``, where
    ``interrupt`` is a KeyboardInterrupt of its own (a batch's ``BatchInterrupted``: rows
    done, paid, how to resume), has that raised instead of the bare KeyboardInterrupt.
    """
    if in_helper_thread():
        coro.close()
        raise RuntimeError(
            "x402lab's sync API was called from its own loop thread; await the async API instead"
        )
    started: list[asyncio.Task[Any]] = []
    ended: list[BaseException] = []

    async def main() -> T:
        task = asyncio.current_task()
        if task is not None:
            started.append(task)
        try:
            return await coro
        except BaseException as exc:
            ended.append(exc)  # a cancelled task's own exception is not passed on by it
            raise

    future = submit(main())
    try:
        return future.result()
    except KeyboardInterrupt:
        if started:
            helper_loop().call_soon_threadsafe(started[0].cancel)
        else:
            future.cancel()
        concurrent.futures.wait([future], timeout=5.0)
        carried = ended[0].args[0] if ended and ended[0].args else None
        if isinstance(carried, KeyboardInterrupt):
            raise carried.with_traceback(None) from None
        raise
