"""What the person sees in Jupyter. Views only observe; every request lives in the services.

Importing this package inside IPython registers the display of media jobs (``AsyncJob`` and
its sync twin ``Job``): a live progress bar, then a player. Batch progress is a tqdm bar
(``x402lab.batch.output``): tqdm draws its own notebook widget. It registers by type name, so
nothing heavy is imported until a job is shown, and outside IPython it does nothing.
"""

from __future__ import annotations

import sys
from typing import Any

_JOB_TYPES = (("x402lab.media.job", "AsyncJob"), ("x402lab.media.job", "Job"))


def _display_job(job: Any) -> None:
    from x402lab.widgets.job import show_job

    show_job(job)


def register(shell: Any = None) -> bool:
    """Register the job display with IPython (the running shell by default).

    Returns False when there is no IPython shell. Safe to call more than once.
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    formatter = shell.display_formatter.ipython_display_formatter
    for module, name in _JOB_TYPES:
        formatter.for_type_by_name(module, name, _display_job)
    return True


register()

__all__ = ["register"]
