"""``x402lab prices``: the gateway's price list, free (the code is in ``catalog.py``)."""

from x402lab.cli.catalog import HELP_PRICES as HELP
from x402lab.cli.catalog import configure_prices as configure
from x402lab.cli.catalog import run_prices as run

__all__ = ["HELP", "configure", "run"]
