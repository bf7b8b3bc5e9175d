"""One exception tree for the whole toolkit.

    X402LabError
    ├── ConfigError                 bad arguments or settings (bad key, unknown budget, bad path)
    │   └── ArgumentError           an unknown keyword (with a did-you-mean) or a wrong type
    ├── ProtocolError               a malformed x402 message (header, JSON, version)
    │   └── LimitExceeded           an answer broke a bound (its size, its JSON nesting)
    ├── PaymentError                anything about paying
    │   ├── PaymentRefused          the client refused to sign (challenge failed a check)
    │   │   └── BudgetExceeded      the budget cannot cover the amount
    │   ├── PaymentRejected         the server refused a signed payment; nothing settled
    │   └── SettlementUnknown       a signed payment left and no clear answer came back
    │       └── AnswerLost          it settled on an earlier send, and that answer was lost
    ├── ApiError                    the service answered with an error (status, code, body)
    │   ├── ModelNotFound           missing, unknown or unpriced model id
    │   ├── QuoteRejected           a music or video quote was refused
    │   ├── NotFound                404 from a service (unknown handle, no matching reports)
    │   └── RateLimited             429 after the retries of the unpaid phase
    ├── TransportError              the service could not be reached (nothing was paid)
    ├── JobError                    a media job failed or timed out
    └── StoreError                  the store could not keep a write (a full disk, a lost file)

    KeyboardInterrupt
    └── BatchInterrupted            a batch stopped by Ctrl+C: rows done, paid, how to resume

    UserWarning
    ├── IncompleteBatchWarning      a batch ended with rows not answered (each status's count)
    └── GoldWarning                 a label no gold row has: its estimate leans on the model
    └── EmptyDocumentWarning        a paid parse of a document that is not empty gave no text

Every money error says what was refused and why in ``reason``. ``BatchInterrupted`` is a
KeyboardInterrupt, not an X402LabError, so an interrupted script still stops.
"""

from __future__ import annotations

from typing import Any


class X402LabError(Exception):
    """Base class of every error raised by x402lab."""


class ConfigError(X402LabError, ValueError):
    """Bad arguments or settings."""


class ArgumentError(ConfigError, TypeError):
    """A call's arguments are wrong: an unknown keyword (the message guesses the one meant) or
    a value of the wrong type. Also a TypeError, as Python's own for a bad keyword."""


class ProtocolError(X402LabError, ValueError):
    """A malformed x402 message: header encoding, JSON, version or fields."""


class LimitExceeded(ProtocolError):
    """An answer broke one of the lab's bounds (``x402lab.transport.limits.Limits``): it was
    larger than its kind's limit, or its JSON nested too deeply. ``limit`` names the limit.
    Nothing was signed for a 402 that broke one."""

    def __init__(self, message: str, *, limit: str = "") -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), str(self), {"limit": self.limit}))


class PaymentError(X402LabError):
    """Base class of the errors about paying. ``reason`` says what happened."""

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.reason, self.details))


def _rebuild(cls: type[Exception], message: str, keywords: dict[str, Any]) -> Exception:
    """An x402lab error unpickled: its keyword-only arguments are not in ``args``."""
    return cls(message, **keywords)


class PaymentRefused(PaymentError):
    """The client refused to sign: the challenge failed a check. Nothing was signed."""


class BudgetExceeded(PaymentRefused):
    """The budget cannot cover the amount. Nothing was signed."""


class PaymentRejected(PaymentError):
    """The server refused a signed payment; nothing settled.

    The signed authorization still counts against the budget (``held``) until the chain shows
    it settled, or unused once its ``validBefore`` has passed: whoever holds it could still
    settle it.
    """


class SettlementUnknown(PaymentError):
    """A signed payment left the process and no clear answer came back.

    The authorization may or may not have settled: it counts against the budget, the ledger
    row is ``unknown``, and x402lab never signs a new authorization for the same request.
    """


class AnswerLost(SettlementUnknown):
    """The payment settled (a send of the same signed payload was answered "nonce already
    used", and the chain confirms it when one is configured), but its answer never arrived.

    ``details["settled"]`` says whether the ledger row is ``settled`` (confirmed on the
    chain, with ``tx_hash``) or still ``unknown`` (no chain to ask: ``reconcile()`` settles
    it). Never paid again on its own; buying the request again is a new purchase.
    """


class ApiError(X402LabError):
    """The service answered with an error."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        body: Any = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body
        self.url = url

    def __reduce__(self) -> tuple[Any, ...]:
        keywords = {"status": self.status, "code": self.code, "body": self.body, "url": self.url}
        return (_rebuild, (type(self), self.message, keywords))


class ModelNotFound(ApiError):
    """A missing, unknown or unpriced model id (the gateway's 400, or caught before sending)."""


class QuoteRejected(ApiError):
    """A music or video quote was refused (for example a duration outside the constraints)."""


class NotFound(ApiError):
    """A 404: an unknown handle, or a range that matched no report."""


class RateLimited(ApiError):
    """Still rate limited (429) after the retries of the unpaid phase."""


class TransportError(X402LabError):
    """The service could not be reached. Raised only where nothing was paid."""


class JobError(X402LabError):
    """A media job failed or did not finish in time."""


class StoreError(X402LabError):
    """The store (the ledger database) could not keep a write, such as a batch's answers.

    What was paid is in the ledger; a row whose answer was lost is reported as
    ``paid_not_stored`` by the next run and never bought again on its own.
    """


class BatchInterrupted(KeyboardInterrupt):
    """A batch stopped by Ctrl+C (the sync ``Lab``) or a cancelled task (``AsyncLab``).

    The first interrupt drains: no request starts any more, the ones already sent finish and
    their answers are stored. The message says how many rows were done, what this run paid,
    how many requests were in flight at the stop and how each ended, and how to resume: run
    the same call again (stored rows are reused, nothing is paid twice). ``in_flight``: the
    requests in flight at the stop; ``ended``: how they ended (status: requests);
    ``stopped_at_once``: a second interrupt did not wait for them. A KeyboardInterrupt, so a
    script still stops. In ``AsyncLab`` the batch task ends with an ``asyncio.CancelledError``
    whose argument is this exception (a cancelled task must stay cancelled).
    """

    def __init__(
        self,
        message: str,
        *,
        rows: int = 0,
        rows_done: int = 0,
        paid_atomic: int = 0,
        in_flight: int = 0,
        ended: dict[str, int] | None = None,
        stopped_at_once: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.rows = rows
        self.rows_done = rows_done
        self.paid_atomic = paid_atomic
        self.in_flight = in_flight
        self.ended = dict(ended or {})
        self.stopped_at_once = stopped_at_once

    def __reduce__(self) -> tuple[Any, ...]:
        keywords = {
            "rows": self.rows,
            "rows_done": self.rows_done,
            "paid_atomic": self.paid_atomic,
            "in_flight": self.in_flight,
            "ended": self.ended,
            "stopped_at_once": self.stopped_at_once,
        }
        return (_rebuild, (type(self), self.message, keywords))


class IncompleteBatchWarning(UserWarning):
    """A batch ended with rows not answered (``skipped_budget``, ``refused``, ``invalid``,
    ``paid_not_stored``, ``unknown``, ``failed``): the message names each status with its
    count and USD, and what to do next. Filter it as any warning
    (``warnings.simplefilter("error", xl.IncompleteBatchWarning)`` makes it an error)."""


class GoldWarning(UserWarning):
    """Gold labels too thin for what is measured with them: a label (or a field's value) no
    gold row has, named in the message, whose share or accuracy then leans on the model
    alone. Label rows of it too (``xl.gold_sample(frame, n, by=...)``)."""


class EmptyDocumentWarning(UserWarning):
    """A paid parse of a document that is not empty came back with no text (a scanned PDF
    without a text layer, a format the parser does not read): the payment is kept, the text
    is ''."""
