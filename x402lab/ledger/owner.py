"""Who holds a claim or sent a payment: this process, told apart from any other, and whether
a process named that way is still running.

An owner is ``host:pid:start`` (``start`` in seconds since the epoch, from the kernel's
record of the process). A process on this host is alive when its pid runs *and* started at
the same second, so a later process that reuses the pid is not mistaken for it. A process on
another host cannot be checked from here: ``owner_gone`` says False for it, and callers fall
back to age (a stale claim) or to the authorization's window.
"""

from __future__ import annotations

import functools
import os
import socket
import time

_OWNER: str | None = None


def process_owner() -> str:
    """``host:pid:start``: this process, told apart from a later one that reuses its pid."""
    global _OWNER
    if _OWNER is None:  # forgotten in a forked child (below): recomputed there
        _OWNER = f"{_hostname()}:{os.getpid()}:{_process_start('self')}"
    return _OWNER


def _forget_owner() -> None:
    global _OWNER
    _OWNER = None


# Every paid call asks; a fork is the only way the answer changes (and asking the kernel
# for the pid each time was a system call per ledger row).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_owner)


def user_label() -> str:
    """Who is paying, as the ledger's ``user_label`` says it: ``X402LAB_USER`` when set, else
    ``login@host`` (what a team reads in ``lab.spend(by="user")``)."""
    given = os.environ.get("X402LAB_USER", "").strip()
    if given:
        return given
    import getpass

    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without a passwd entry)
        login = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{login}@{_hostname()}"


@functools.cache
def _hostname() -> str:
    return socket.gethostname()


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process ``owner`` names still runs: True or False on this host, None when
    it cannot be told (another host, or an owner written in another form)."""
    if not owner:
        return None
    if owner == process_owner():
        return True
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != _hostname():
        return None
    try:
        pid, start = int(parts[1]), int(parts[2])
    except ValueError:
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, under another user
    except OSError:
        return None
    found = _process_start(str(pid), fallback=False)
    if found is None:  # no /proc: a running pid is all that can be told
        return True
    # The start time is derived from clock ticks: allow one second of rounding.
    return abs(found - start) <= 1


def owner_gone(owner: str | None) -> bool:
    """True only when ``owner`` is a process of this host that no longer runs."""
    return owner_alive(owner) is False


def _process_start(pid: str, *, fallback: bool = True) -> int | None:
    try:  # Linux: field 22 of /proc/PID/stat is the start time in clock ticks after boot
        with open(f"/proc/{pid}/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime"))
        return boot + ticks // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return int(time.time()) if fallback else None
