"""Which line of a cell paid: found in the rehearsing kernel, shown by the plan table.

A cell runs as top-level code of ``__main__`` (the kernel ``exec``s it in the notebook's
namespace), on the kernel's main thread. A paid request is sent from x402lab's own loop
thread while that code waits for it (the sync Lab), or from the main thread itself (an
``await`` in the cell), so the running cell's line is found on one of those two stacks: the
innermost frame of ``__main__`` module code (a function the cell calls is not module code;
the kernel's own launcher script, further out, is). The table then shows the innermost statement
that holds that line, from its first line, so a call spread over several lines reads as
written and a call in a loop shows the call, not the loop.
"""

from __future__ import annotations

import ast
import sys
import threading
from types import FrameType


def _cell_line(frame: FrameType | None) -> int | None:
    # The innermost module code of ``__main__``: further out is the kernel's launcher script.
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            return frame.f_lineno
        frame = frame.f_back
    return None


def paying_line() -> int | None:
    """The line of the running cell whose statement is sending a request now, or None."""
    here = sys._getframe(1)
    main = sys._current_frames().get(threading.main_thread().ident or 0)
    for frame in (here, main):
        line = _cell_line(frame)
        if line is not None:
            return line
    return None


def statement_at(source: str, line: int) -> str:
    """The first line of the innermost statement of ``source`` that holds ``line`` (the line
    itself when the source does not parse, e.g. a cell with IPython magics)."""
    lines = source.splitlines()
    start = line
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is not None:
        holding = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or line)
        ]
        start = max(holding, default=line)
    return lines[start - 1].strip() if 0 < start <= len(lines) else ""
