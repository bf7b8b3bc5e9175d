"""How a batch runs, apart from what it asks: ``RunOptions``, checked once per call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from x402lab.batch.concurrency import AutoConcurrency, Concurrency, concurrency_of
from x402lab.errors import ConfigError

#: Free quotes in flight under ``concurrency="auto"``: the fixed default batches had before.
QUOTES_IN_FLIGHT = 8


@dataclass(frozen=True)
class RunOptions:
    """The options every batch call shares (``batch_chat``, ``batch_embed``, ``estimate``,
    ``compare``): requests in flight, the per-request cap, what is bought again, whether a
    batch that does not fit spends what is left, and how progress is shown. Checked when
    made: ConfigError names the bad value."""

    #: "auto", an AutoConcurrency or an int in 1..1024 (kept as ``pacing.concurrency_of``
    #: reads it).
    concurrency: Concurrency | str = "auto"
    #: The most one request may cost, in USD (the budget caps the whole run).
    max_usd_per_request: float | None = None
    #: False, True (buy every row again) or "lost" (the rows paid without a stored answer).
    rebuy: bool | str = False
    #: Spend what the budget has left and skip the rest, instead of refusing the batch.
    partial: bool = False
    #: "auto", "text", a tqdm instance, a callable taking BatchProgress, or None.
    progress: Any = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "concurrency", concurrency_of(self.concurrency))
        if not (isinstance(self.rebuy, bool) or self.rebuy == "lost"):
            raise ConfigError(f'rebuy must be True, False or "lost", got {self.rebuy!r}')

    @property
    def quotes_in_flight(self) -> int:
        """The free requests a quote keeps in flight: the number given, or for "auto"
        ``QUOTES_IN_FLIGHT`` (a quote learns no rate; two at a time, a 400-request quote at
        250 ms took 50 s)."""
        given = self.concurrency
        if isinstance(given, AutoConcurrency):
            return min(given.ceiling, QUOTES_IN_FLIGHT)
        assert isinstance(given, int)
        return given
