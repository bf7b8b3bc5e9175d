"""``x402lab report --ledger URL --out FOLDER``: the cost report of a ledger, for a lead with a
read-only role and no key (``analysis.ledger_reports``): no lab, no wallet, nothing written to
the ledger and no recovery run; the report's HTML page, its figures and one Parquet file per
table go to ``FOLDER``."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write the cost report of a ledger (read only: no wallet, nothing written to it)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ledger",
        default=None,
        help="ledger file or postgresql:// URL (default ~/.x402lab/ledger.sqlite)",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write the report to")
    parser.add_argument("--budget", default=None, help="only the rows of this budget")
    parser.add_argument(
        "--batches",
        nargs="*",
        default=None,
        help="batch results (Parquet files or out= folders) for per-row costs and savings",
    )


def run(args: argparse.Namespace) -> int:
    from x402lab.analysis.ledger_reports import Ledger
    from x402lab.cli.ledger import existing_ledger
    from x402lab.ledger import DEFAULT_LEDGER_PATH

    ledger = Ledger(existing_ledger(args.ledger or DEFAULT_LEDGER_PATH))
    try:
        report = ledger.cost_report(batches=args.batches or None, budget=args.budget)
    finally:
        ledger.close()
    page = report.save(args.out)
    print(f"cost report of {ledger.db.url}: {page}")
    return 0
