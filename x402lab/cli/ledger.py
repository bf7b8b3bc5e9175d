"""``x402lab ledger summary``, ``export PATH`` and ``reconcile``: the payment ledger.

``summary`` and ``export`` only read the ledger file; nothing is sent anywhere.
``reconcile --chain-rpc-url URL`` asks a Base JSON-RPC endpoint about every ``signed`` or
``unknown`` row and records what the chain shows (settled, or expired and freed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = "summarize the payment ledger, export it, or reconcile it with the chain"
EXPORT_FORMATS = (".parquet", ".csv")
SUMMARY_COLUMNS = (
    "payments",
    "settled_count",
    "settled_usd",
    "unknown_count",
    "unknown_usd",
    "in_flight_count",
    "refused_count",
    "rejected_count",
    "failed_count",
)


def _keys(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _common(parser: argparse.ArgumentParser, *, budget: bool = True) -> None:
    parser.add_argument(
        "--ledger",
        default=None,
        help="ledger file or postgresql:// URL (default ~/.x402lab/ledger.sqlite)",
    )
    if budget:
        parser.add_argument("--budget", default=None, help="only the rows of this budget")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``summary`` and ``export`` subcommands."""
    actions = parser.add_subparsers(dest="ledger_action", metavar="ACTION", required=True)
    summary = actions.add_parser("summary", help="spend per service, path and model")
    _common(summary)
    summary.add_argument(
        "--by",
        type=_keys,
        default=("service", "path", "model"),
        help="comma-separated keys among service,path,model,day,budget",
    )
    export = actions.add_parser("export", help="write ledger rows to PATH (.parquet or .csv)")
    export.add_argument("path", type=Path, help="output file; its extension picks the format")
    _common(export)
    export.add_argument(
        "--by",
        type=_keys,
        default=None,
        help="export the spend table grouped by these keys instead of the rows",
    )
    export.add_argument(
        "--atomic",
        action="store_true",
        help="with --by: add the exact integer columns in USDC base units (*_atomic)",
    )
    reconcile = actions.add_parser(
        "reconcile", help="check signed/unknown rows against the chain and record the outcome"
    )
    _common(reconcile, budget=False)
    reconcile.add_argument(
        "--chain-rpc-url",
        default=None,
        help="a Base JSON-RPC endpoint (default: the X402LAB_CHAIN_RPC_URL variable)",
    )


def existing_ledger(where: str) -> str | Path:
    """A ledger file that exists, or a database URL as given (``postgresql://...``). Raises
    ConfigError for a missing file: reading must not create one."""
    from x402lab.errors import ConfigError

    if "://" in where:
        return where
    path = Path(where).expanduser()
    if not path.is_file():
        raise ConfigError(f"no ledger at {path} (give one with --ledger PATH or URL)")
    return path


def _open_rows(args: argparse.Namespace) -> Any:
    """The ledger's rows as a DataFrame (one budget's when asked). Raises ConfigError."""
    from x402lab.analysis.spend import budget_rows
    from x402lab.ledger import DEFAULT_LEDGER_PATH, Ledger

    ledger = Ledger(existing_ledger(args.ledger or DEFAULT_LEDGER_PATH))
    try:
        return budget_rows(ledger, args.budget)
    finally:
        ledger.close()


def _summary(args: argparse.Namespace) -> int:
    import pandas as pd

    from x402lab.analysis.spend import spend
    from x402lab.money import format_usd

    rows = _open_rows(args)
    table = spend(rows, args.by)
    totals = spend(rows, (), atomic=True)
    if len(totals) == 0:
        print("the ledger holds no payments")
        return 0
    # Column by column: a row of mixed dtypes would turn the counts into floats.
    line = {name: int(totals[name].iloc[0]) for name in totals.columns if "usd" not in name}
    print(
        f"settled {format_usd(line['settled_atomic'])} in {line['settled_count']} payments;"
        f" unknown exposure {format_usd(line['unknown_atomic'])}"
        f" ({line['unknown_count']} payments); in flight"
        f" {format_usd(line['in_flight_atomic'])}; {line['payments']} ledger rows"
    )
    shown = table[[*args.by, *SUMMARY_COLUMNS]]
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(shown.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.6f}"))
    return 0


def _export(args: argparse.Namespace) -> int:
    from x402lab.analysis.spend import spend
    from x402lab.errors import ConfigError

    target: Path = args.path.expanduser()
    suffix = target.suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise ConfigError(f"cannot tell the format of {target}: use a .parquet or .csv name")
    from x402lab.ledger import ledger_schema
    from x402lab.tables.spend import spend_schema

    rows = _open_rows(args)
    if args.by is None:
        table, schema = rows, ledger_schema()
    else:
        table = spend(rows, args.by, atomic=args.atomic)
        schema = spend_schema(args.by, atomic=args.atomic)
    write_table(table, target, schema)
    what = "ledger rows" if args.by is None else f"spend rows by {','.join(args.by)}"
    print(f"wrote {len(table)} {what} to {target}")
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    import asyncio
    from datetime import timedelta

    import pandas as pd

    from x402lab.chain import ChainClient, chain_url_from_env, reconcile
    from x402lab.errors import ConfigError
    from x402lab.ledger import DEFAULT_LEDGER_PATH, EXPIRY_SLACK_S, Ledger
    from x402lab.money import format_usd

    slack = timedelta(seconds=EXPIRY_SLACK_S)

    url = args.chain_rpc_url or chain_url_from_env()
    if not url:
        raise ConfigError("give the chain with --chain-rpc-url URL or X402LAB_CHAIN_RPC_URL")
    chain = ChainClient(url)
    ledger = Ledger(existing_ledger(args.ledger or DEFAULT_LEDGER_PATH))

    async def check() -> Any:
        try:
            return await reconcile(ledger, chain)
        finally:
            await chain.aclose()

    try:
        done = asyncio.run(check())
    finally:
        ledger.close()
    frame = done.to_pandas()
    changed = frame[frame["before"] != frame["after"]]
    print(f"checked {done.checked} signed/unknown rows against {url}: {len(changed)} changed")
    if len(changed):
        shown = changed[["id", "before", "after", "amount_usd", "tx_hash", "note"]]
        with pd.option_context("display.width", 200, "display.max_columns", None):
            print(shown.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.6f}"))
    for row in done.still_open:
        expires = row.expires_at.isoformat() if row.expires_at else "unknown"
        free = f", freed from {row.expires_at + slack:%H:%M:%S} UTC" if row.expires_at else ""
        print(
            f"still open: row {row.id} ({row.status}, {format_usd(row.amount_atomic)}):"
            f" unused on chain, valid until {expires}{free}"
        )
    return 0


def write_table(frame: Any, target: Path, schema: Any = None) -> None:
    """Write a DataFrame to ``target``, Parquet or CSV by its extension.

    Parquet keeps ``schema`` (a declared Arrow schema) when one is given. The file is the
    owner's alone (0600; a folder it makes 0700): a ledger's rows say what was bought.
    """
    from x402lab.private import open_private

    if target.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        from x402lab.tables.spend import to_arrow

        with open_private(target) as out:
            if schema is not None:
                pq.write_table(to_arrow(frame, schema), out)
            else:
                frame.to_parquet(out, index=False)
    else:
        with open_private(target, "w") as out:
            frame.to_csv(out, index=False)


def run(args: argparse.Namespace) -> int:
    """Run ``summary``, ``export`` or ``reconcile``; returns 0. Raises ConfigError for a
    missing ledger or chain, TransportError for a chain that cannot be read."""
    if args.ledger_action == "summary":
        return _summary(args)
    if args.ledger_action == "reconcile":
        return _reconcile(args)
    return _export(args)
