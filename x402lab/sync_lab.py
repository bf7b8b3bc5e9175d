"""The sync ``Lab`` (temporary runtime twin; replaced by generated typed source)."""

from __future__ import annotations

from typing import Any

from x402lab.lab import AsyncLab
from x402lab.sync import sync_twin

Lab: Any = sync_twin(
    AsyncLab, "Lab", doc="The x402lab client. Build one with ``x402lab.connect()``."
)


def _enter(self: Any) -> Any:
    return self


def _exit(self: Any, *exc: object) -> None:
    self.close()


Lab.__enter__ = _enter
Lab.__exit__ = _exit
