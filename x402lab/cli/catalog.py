"""``x402lab models`` and ``x402lab prices``: the gateway's free catalog and price list.

Both print a table, or write a file (``--out x.parquet`` or ``x.csv``). They talk to
``--gateway-url`` when given, else to a local emulator started for the command. Nothing is
paid: the catalog routes are free, and the throwaway wallet and ledger are deleted after.
The commands themselves are registered through ``x402lab/cli/models.py`` and ``prices.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from x402lab.routes import MODEL_TYPES as CATALOG_MODEL_TYPES

HELP_MODELS = "list the gateway's models (free), as a table or to a file"
HELP_PRICES = "list the gateway's price list (free): upstream and agent rates per model"
OUT_FORMATS = (".parquet", ".csv")
MODEL_TYPES = ("all", *CATALOG_MODEL_TYPES)
MODEL_COLUMNS = (
    "id",
    "type",
    "name",
    "context_tokens",
    "input_usd_per_1m",
    "output_usd_per_1m",
    "main_unit_usd",
    "price_unit",
)
PRICE_COLUMNS = (
    "family",
    "id",
    "unit",
    "accuracy",
    "upstream_input_usd_per_1m",
    "agent_input_usd_per_1m",
    "upstream_output_usd_per_1m",
    "agent_output_usd_per_1m",
    "upstream_usd_per_unit",
    "agent_usd_per_unit",
)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gateway-url",
        default=None,
        help="gateway base address (default: a local emulator started for this command)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="write to this file (.parquet or .csv)"
    )
    parser.add_argument(
        "--all-columns", action="store_true", help="print every column, not the main ones"
    )


def configure_models(parser: argparse.ArgumentParser) -> None:
    """Flags of ``x402lab models``."""
    parser.add_argument("--type", default="all", choices=MODEL_TYPES, help="model type")
    _common(parser)


def configure_prices(parser: argparse.ArgumentParser) -> None:
    """Flags of ``x402lab prices``."""
    _common(parser)


@contextlib.contextmanager
def free_lab(gateway_url: str | None) -> Iterator[Any]:
    """A Lab for free calls: the given gateway with a throwaway wallet and ledger, or the
    embedded emulator. Closed (and its temporary files removed) on exit."""
    import x402lab as xl

    with tempfile.TemporaryDirectory(prefix="x402lab-cli-") as scratch:
        # Free routes only: on a given gateway the wallet is new and empty, the ledger a
        # scratch file.
        wallet = xl.Wallet.create() if gateway_url is not None else None
        lab = xl.connect(gateway_url, wallet=wallet, ledger=Path(scratch) / "ledger.sqlite")
        try:
            yield lab
        finally:
            lab.close()
            lab.ledger.close()


def _emit(table: Any, frame: Any, args: argparse.Namespace, columns: Sequence[str]) -> int:
    """Write ``table`` (Arrow) to ``--out``, or print ``frame`` (pandas) to stdout."""
    import pandas as pd

    from x402lab.errors import ConfigError

    if args.out is not None:
        target: Path = args.out.expanduser()
        suffix = target.suffix.lower()
        if suffix not in OUT_FORMATS:
            raise ConfigError(f"cannot tell the format of {target}: use a .parquet or .csv name")
        from x402lab.private import open_private

        if suffix == ".parquet":
            import pyarrow.parquet as pq

            with open_private(target) as out:
                pq.write_table(table, out)
        else:
            with open_private(target, "w") as out:
                frame.to_csv(out, index=False)
        print(f"wrote {len(frame)} rows to {target}")
        return 0
    shown = frame if args.all_columns else frame[[c for c in columns if c in frame.columns]]
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(shown.to_string(index=False, na_rep="-"))
    return 0


def _arrow_and_frame(lab: Any, name: str, **params: Any) -> tuple[Any, Any]:
    from x402lab.ledger import arrow_to_pandas

    table = lab.catalog_table(name, **params)
    return table, arrow_to_pandas(table)


def run_models(args: argparse.Namespace) -> int:
    """Print or write the model catalog. Raises ConfigError, ApiError, TransportError."""
    with free_lab(args.gateway_url) as lab:
        table, frame = _arrow_and_frame(lab, "models", type=args.type)
    return _emit(table, frame, args, MODEL_COLUMNS)


def run_prices(args: argparse.Namespace) -> int:
    """Print or write the price list. Raises ConfigError, ApiError, TransportError."""
    with free_lab(args.gateway_url) as lab:
        table, frame = _arrow_and_frame(lab, "prices")
    return _emit(table, frame, args, PRICE_COLUMNS)
