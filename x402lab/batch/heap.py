"""The garbage collector during a batch run: it looks only at what the run allocates.

A notebook's process holds a few hundred thousand long-lived objects (pandas, numpy, the
kernel's state). A batch keeps every row's result until it returns, and that growth makes
CPython's collector run full collections of the whole heap: each one stopped the event
loop for 50 to 80 ms, and they took about 5% of a batch's CPU per paid call. ``gc.freeze``
sets the objects that exist when the run starts aside (still alive, never freed, only not
traversed); ``gc.unfreeze`` hands them back to the collector when the last run ends, so
garbage among them is collected then, as it would have been.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_runs = 0
_ours = False  # whether the objects set aside now were set aside here


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Inside: collections skip the objects older than the outermost block. A process that
    froze objects itself (a server forking workers does) is left as it is."""
    global _runs, _ours
    with _lock:
        if _runs == 0:
            _ours = gc.get_freeze_count() == 0
            if _ours:
                gc.freeze()
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _ours:
                gc.unfreeze()
                _ours = False
