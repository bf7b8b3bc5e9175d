"""``x402lab models``: the gateway's model catalog, free (the code is in ``catalog.py``)."""

from x402lab.cli.catalog import HELP_MODELS as HELP
from x402lab.cli.catalog import configure_models as configure
from x402lab.cli.catalog import run_models as run

__all__ = ["HELP", "configure", "run"]
