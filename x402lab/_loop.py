"""A private event loop on a background thread, shared by every sync ``Lab`` of the process.

This is how the sync API works in scripts, in Jupyter cells (whose loop is already running)
and inside other running loops, without patching any loop globally.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
import warnings
from collections.abc import Coroutine
from typing import Any, TypeVar

from x402lab.errors import X402LabError

T = TypeVar("T")

#: Warnings of a coroutine run by ``run``: issued in the caller's thread when it returns.
#: The one context variable of the client, and off the paid path: it decides only where a
#: warning is shown, never what is paid, signed or stored (batch/, transport/, payments/,
#: ledger/ and gateway/ pass what a call needs explicitly; tests/test_layers.py checks).
_deferred: contextvars.ContextVar[list[tuple[str, type[Warning]]] | None] = contextvars.ContextVar(
    "x402lab_deferred_warnings", default=None
)
#: How often a wait for the helper loop wakes to see a Ctrl+C (``_wait``).
POLL_S = 0.1
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
    KeyboardInterrupt while waiting cancels the coroutine and waits for it to unwind: a batch
    drains then (its requests on the wire finish and are stored, each bounded by its timeout);
    a second KeyboardInterrupt cancels it again and waits at most 5 s. A coroutine that ends
    its cancellation with ``CancelledError(interrupt)``, where ``interrupt`` is a
    KeyboardInterrupt of its own (a batch's ``BatchInterrupted``: rows done, paid, how to
    resume), has that raised instead of the bare KeyboardInterrupt.

    An x402lab error comes out without the frames of the coroutine that raised it (the
    helper loop's): the caller's own line and the message, as from a sync function. These
    frames carry ``__tracebackhide__``, which IPython and pytest honour.
    """
    __tracebackhide__ = True
    if in_helper_thread():
        coro.close()
        raise RuntimeError(
            "x402lab's sync API was called from its own loop thread; await the async API instead"
        )
    started: list[asyncio.Task[Any]] = []
    ended: list[BaseException] = []
    deferred: list[tuple[str, type[Warning]]] = []

    async def main() -> T:
        _deferred.set(deferred)  # this task's context, and that of the tasks it starts
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
        result = _result(future)
    except KeyboardInterrupt:
        _stop(future, started, timeout=None)  # the first Ctrl+C drains
        carried = ended[0].args[0] if ended and ended[0].args else None
        if isinstance(carried, KeyboardInterrupt):
            raise carried.with_traceback(None) from None
        raise
    for message, category in deferred:
        # The caller's line (run, then the sync delegator, then the caller), not the loop's.
        warnings.warn(message, category, stacklevel=3)
    return result


def warn(message: str, category: type[Warning]) -> None:
    """Issue a warning where the person sees it: in a coroutine the sync API runs, when
    that call returns, at the caller's line; elsewhere at once."""
    deferred = _deferred.get()
    if deferred is not None:
        deferred.append((message, category))
    else:
        warnings.warn(message, category, stacklevel=3)


def _wait(future: concurrent.futures.Future[Any], timeout: float | None = None) -> None:
    """Wait for ``future`` (at most ``timeout``), waking every ``POLL_S``: a Ctrl+C that the
    kernel delivers to another thread of the process (any thread may take it) is acted on
    only when the main thread runs Python code, and a wait without a timeout does not."""
    __tracebackhide__ = True
    deadline = None if timeout is None else time.monotonic() + timeout
    while not future.done():
        step = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if step <= 0:
            return
        concurrent.futures.wait([future], timeout=step)


def _result(future: concurrent.futures.Future[T]) -> T:
    __tracebackhide__ = True
    try:
        _wait(future)
        return future.result()
    except X402LabError as exc:
        # The helper loop's frames (the library's plumbing) say nothing to the caller.
        raise exc.with_traceback(None) from exc.__cause__


def _stop(
    future: concurrent.futures.Future[Any], started: list[asyncio.Task[Any]], timeout: float | None
) -> None:
    """Cancel the coroutine of ``future`` and wait ``timeout`` for it to unwind; a second
    Ctrl+C meanwhile cancels it again and waits at most 5 s."""
    __tracebackhide__ = True
    try:
        # Inside the try: the loop may cancel, drain and report "stopping" (and the person
        # press Ctrl+C again) before this thread returns from scheduling the cancel.
        if started:
            helper_loop().call_soon_threadsafe(started[0].cancel)
        else:
            future.cancel()
        _wait(future, timeout)
    except KeyboardInterrupt:
        if timeout is None:
            _stop(future, started, timeout=5.0)
