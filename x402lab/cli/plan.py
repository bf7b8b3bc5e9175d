"""``x402lab plan NOTEBOOK.ipynb [--json FILE]``: what running a notebook would cost, free.

Executes the notebook in rehearsal (docs/planning.md): prices from the services it connects
to, answers from a local emulator, each lab on its own budget; no key of the user's in the
kernel, its ledger not written, its folder's files left as they are (a scratch copy takes
what it writes). Prints a progress line per code cell on stderr, then the table of the cells
that would pay, the total, a verdict per budget and what it would write on stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "price a whole notebook before it pays: run it in rehearsal, nothing signed"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the notebook, ``--json``, ``--timeout-s`` (``--timeout``, its old name) and
    ``--kernel``."""
    parser.add_argument("notebook", type=Path, help="the .ipynb file to plan")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="FILE", help="also write the plan as JSON"
    )
    parser.add_argument(
        "--timeout-s",
        "--timeout",
        dest="timeout_s",
        type=float,
        default=600.0,
        help="seconds one cell may run (default 600)",
    )
    parser.add_argument(
        "--kernel", default=None, help="the kernel to run it in (default: the notebook's own)"
    )


def run(args: argparse.Namespace) -> int:
    from x402lab.planning import plan
    from x402lab.planning.executor import describe

    frame = plan(
        args.notebook,
        progress=lambda cell, done, total: print(describe(cell, done, total), file=sys.stderr),
        timeout_s=args.timeout_s,
        kernel_name=args.kernel,
    )
    print(frame.to_text())
    if args.json is not None:
        from x402lab.private import write_private

        write_private(args.json, frame.to_plan_json() + "\n")
        print(f"plan written to {args.json}", file=sys.stderr)
    return 0
