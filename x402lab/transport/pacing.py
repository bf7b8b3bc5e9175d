"""Who hears of a 429: the pacer of the batch request being sent, when there is one.

A batch (``batch.concurrency``) sets ``pacer`` for each request it sends; the transport tells it
of every 429 it meets, unpaid or paid, and waits as long as it says before sending again (a
paid request is sent again with the same signed payload: a 429 never makes a signature).
Without a pacer, the transport waits as ``retry.retry_delay`` says.
"""

from __future__ import annotations

import contextvars
from typing import Protocol


class Pacer(Protocol):
    def limited(self, retry_after_s: float | None) -> float:
        """A 429 met (``Retry-After`` in seconds, if sent); returns the seconds to wait
        before sending again."""
        ...

    def resending(self) -> None:
        """The request that met a 429 is sent again now."""
        ...


#: The pacer of the request this task sends (None outside a paced batch).
pacer: contextvars.ContextVar[Pacer | None] = contextvars.ContextVar("x402lab_pacer", default=None)
