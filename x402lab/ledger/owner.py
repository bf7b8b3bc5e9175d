"""Who holds a claim: this process, told apart from any other (issue 12 adds liveness)."""

from __future__ import annotations

import os
import socket
import time

_OWNER: tuple[int, str] | None = None


def process_owner() -> str:
    """``host:pid:start``: this process, told apart from a later one that reuses its pid."""
    global _OWNER
    pid = os.getpid()
    if _OWNER is None or _OWNER[0] != pid:  # recomputed in a forked child
        _OWNER = (pid, f"{socket.gethostname()}:{pid}:{_process_start()}")
    return _OWNER[1]


def _process_start() -> int:
    try:  # Linux: field 22 of /proc/self/stat is the start time in clock ticks after boot
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime"))
        return boot + ticks // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return int(time.time())
