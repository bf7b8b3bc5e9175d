"""How busy a thread has been lately: its CPU time over wall time, a short window at a time.

Two parts of a batch change how they work when the event loop's thread is busy nearly all
the time (the batch is bound by the client's own work, not by the round trip): its send
turn steps aside (``transport.turn``) and the ledger's write-ahead fsync leaves the loop for
a worker thread (``ledger.write_ahead``). The thread's CPU clock is read once a window, not
once a call: it is a system call, and on a loaded machine the kernel often hands the core to
another process right there (1.4 ms a read on average in the loopback benchmark, load
average 9).
"""

from __future__ import annotations

import time

#: How long each measure lasts.
WINDOW_S = 0.1


class Busy:
    """The share of wall time the thread that reads it spent on the CPU over its last whole
    window (0 until a window has passed). Read it from one thread only: the clock it reads
    is the calling thread's."""

    def __init__(self) -> None:
        self._window = (time.perf_counter(), time.thread_time())
        self.last = 0.0

    def share(self) -> float:
        """The last whole window's share, measured anew once ``WINDOW_S`` has passed."""
        wall = time.perf_counter()
        wall_0, cpu_0 = self._window
        if wall - wall_0 >= WINDOW_S:
            cpu = time.thread_time()
            self.last = (cpu - cpu_0) / (wall - wall_0)
            self._window = (wall, cpu)
        return self.last
