"""The paid report service."""

from __future__ import annotations

from typing import Any


class AsyncReports:
    """``lab.reports``: shelf, menus, quotes and purchases of report snapshots."""

    def __init__(self, lab: Any) -> None:
        self._lab = lab
