"""One limit, shared: the processes paying from one wallet learn a service's rate together.

Each batch running ``concurrency="auto"`` keeps one row of the ledger's ``rate_limits``
table (``ledger.RateLimits``: wallet, service, a random member id): its rate, the rate it
saw all of them run at, the time of its last cut. Every ``PERIOD_S`` (and at once after a
429) it writes its row and reads the others' (``RateController.merge``): a cut by one is a
cut by all, the additive increase is divided among them, and a process that starts while
others run (or soon after they ran) starts at the rate they learned instead of finding it
again with 429s. The same works through SQLite (notebooks on one machine) and PostgreSQL (a
team, Dask workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from x402lab.batch.concurrency._rate import ACTIVE_S, Peer, RateController
from x402lab.ledger import RateLimits, RateRow

if TYPE_CHECKING:
    from x402lab.ledger import Database
    from x402lab.session import Session

#: Seconds between two exchanges through the ledger.
PERIOD_S = 0.25
#: ... while no limit is known yet.
SEARCH_PERIOD_S = 0.05
#: How long a learned rate is remembered for the next run (and rows are kept).
REMEMBER_S = 600.0


class RateShare:
    """This process's row among a wallet's ``rate_limits`` rows for one service."""

    def __init__(
        self,
        db: Database,
        payer: str,
        service: str,
        *,
        member: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = RateLimits(db, payer, service)
        self.member = member or uuid.uuid4().hex
        self._clock = clock
        self._poked = asyncio.Event()

    def sync(self, controller: RateController) -> None:
        """Write this process's row, read the others' and let ``controller`` take them in."""
        now = self._clock()
        self._write(controller.shared(), now)
        others = self.table.others(self.member, since=now - REMEMBER_S)
        controller.merge(Peer(r.rate, r.wallet_rate, r.cut_at, r.seen_at) for r in others)

    def _write(self, mine: Peer, seen_at: float) -> None:
        self.table.write(self.member, RateRow(mine.rate, mine.wallet_rate, mine.cut_at, seen_at))

    def sent_times(self, seconds: float) -> list[float]:
        """When this wallet's processes made their payments over the last ``seconds`` (each
        one request sent), read from the ledger they share."""
        return self.table.sent_times(since=self._clock() - seconds)

    def poke(self) -> None:
        """Exchange now (a 429 was met: the others should hear of the cut)."""
        self._poked.set()

    async def keep(self, controller: RateController, changed: Callable[[], None]) -> None:
        """Exchange every ``PERIOD_S`` (or when poked) until cancelled; ``changed`` is
        called after each, so waiting requests see the new rate."""
        while True:
            self.sync(controller)
            changed()
            self._poked.clear()
            # While no limit is known, more often: a cut one process meets should reach the
            # others before their own requests meet it.
            period = SEARCH_PERIOD_S if math.isinf(controller.wallet_rate) else PERIOD_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poked.wait(), period)

    def leave(self, controller: RateController) -> None:
        """The run ended: the row stays (the next run starts from its rate) but no longer
        counts as a process sharing the limit now."""
        self._write(controller.shared(), self._clock() - ACTIVE_S - 1)
        self.table.forget(before=self._clock() - REMEMBER_S)


def share_for(session: Session, service: str = "gateway") -> RateShare:
    """The rate share of ``session``'s wallet for ``service``, through its ledger."""
    return RateShare(session.ledger.db, session.wallet.address, service)
