"""Re-send, never re-sign: what happens after an ambiguous answer to a paid request.

A paid request that got no clear answer (a timeout, a dropped connection, a 5xx or a 429
after the payment header left) is sent again *as it was*: the same request with the same
signed payment header, so the same nonce, which the USDC contract lets settle at most once.
Sends follow the unpaid phase's backoff (``Retry-After`` honoured) while the authorization
is valid (``Payer.resend_deadline``). The first clear answer decides:

- a receipt: ``settled``; a refusal: ``rejected``/``failed``, as for a first send;
- "nonce already used" (or a 409): an earlier send settled and its answer was lost. With a
  chain to ask, the row is ``settled`` with the transaction's hash; without, it stays
  ``unknown`` with a note. Either way the caller gets ``AnswerLost``;
- the window closing first: ``unknown``, for reconciliation (``SettlementUnknown``);
- a 402 to a *prepaid* payload (sent with the first request for a predicted challenge, see
  ``payments.prediction``): ``rejected`` with reason ``prepay_refused`` (held until it
  expires) and the prediction is forgotten, but no fresh challenge is signed here: an
  earlier send got no clear answer and may have settled before the price changed, so a
  new signature could pay twice (only a 402 to the *first* send is paid afresh,
  ``transport.auth``).

A cancellation (or any interruption) while sending leaves the row ``unknown``; it is never
signed again, and a later call for the same request key sends the stored payload again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn

import httpx

from x402lab.chain.reconcile import used_on_chain
from x402lab.errors import X402LabError
from x402lab.payments import Kind, Outcome, Payer, Ticket
from x402lab.payments.payer import is_prepay_refusal
from x402lab.transport.auth import CallState, outcome_of
from x402lab.transport.retry import RetryPolicy, retry_delay, seconds_of
from x402lab.transport.wire import Wire

if TYPE_CHECKING:
    from x402lab.chain import ChainClient

#: How often, and how far apart, the chain is asked about a nonce the server says is used
#: while its settlement may still be confirming.
CHAIN_LOOKS = 3
CHAIN_LOOK_S = 0.5


class Resender:
    """Sends the same paid request again until its payment's outcome is clear."""

    def __init__(
        self,
        *,
        http: Wire,
        payer: Payer,
        retry: RetryPolicy,
        sleep: Callable[[float], Awaitable[None]],
        chain: Callable[[], ChainClient | None],
    ) -> None:
        self.http = http
        self.payer = payer
        self.retry = retry
        self._sleep = sleep
        self._chain = chain

    async def settle(
        self, request: httpx.Request, state: CallState, *, stream: bool
    ) -> httpx.Response:
        """Send ``request`` (its payment header set) again until a clear answer; returns
        that answer (its cost in ``state.cost``). ``state.pending``: the ambiguous outcome of
        the first send. Raises PaymentRejected, SettlementUnknown or AnswerLost, as the
        answer says; the row is never left ``signed``."""
        ticket, outcome = state.ticket, state.pending
        assert ticket is not None and outcome is not None
        payer = self.payer
        attempt = 0
        try:
            while True:
                if outcome.kind is Kind.NONCE_USED:
                    await self._answer_lost(ticket, state, outcome)
                paced = ticket.call.pacer if outcome.status_code == 429 else None
                if paced is not None:  # a batch paces its requests: it says how long
                    delay = paced.limited(seconds_of(outcome.retry_after, time.time()))
                else:
                    delay = retry_delay(self.retry, attempt, outcome.retry_after, time.time())
                if payer.now() + delay >= payer.resend_deadline(ticket):
                    state.pending = None
                    payer.give_up(
                        ticket,
                        f"{outcome.reason}; sent again until its authorization was about to expire",
                        outcome.status_code,
                    )
                await self._sleep(delay)
                if paced is not None:
                    paced.resending()
                attempt += 1
                payer.record_resend(ticket)
                try:
                    response = await self.http.send(request, stream=stream)
                except httpx.HTTPError as exc:
                    outcome = no_answer(exc)
                    continue
                if response.status_code >= 300:
                    await response.aread()
                outcome = outcome_of(payer, response)
                if outcome.kind in (Kind.RESEND, Kind.NONCE_USED):
                    await response.aclose()
                    continue
                tally = ticket.call.prepay_tally
                if ticket.prepaid and is_prepay_refusal(outcome) and state.predicted:
                    payer.prediction.missed(state.predicted, tally)
                state.pending = None
                state.cost = payer.record(ticket, outcome)
                if outcome.kind is Kind.SETTLED and ticket.prepaid and state.predicted:
                    payer.prediction.hit(state.predicted, tally)  # taken, on a later send
                return response
        except BaseException:
            if state.pending is not None:
                # Cancelled (or interrupted) while sending again: never signed again.
                state.pending = None
                payer.record_ambiguous(
                    ticket, f"{outcome.reason}; interrupted while sending it again"
                )
            raise

    async def _answer_lost(self, ticket: Ticket, state: CallState, outcome: Outcome) -> NoReturn:
        """ "Nonce already used": ask the chain (when one is configured) and raise."""
        chain = self._chain()
        if chain is None:
            state.pending = None
            self.payer.answer_lost(ticket, None, outcome)
        auth = ticket.payload.authorization
        since = ticket.valid_before - ticket.requirements.max_timeout_seconds
        found: tuple[bool, str | None] | None = None
        unasked = "no chain to confirm it"
        try:
            for look in range(CHAIN_LOOKS):
                found = await used_on_chain(
                    chain,
                    asset=ticket.requirements.asset,
                    payer=auth.from_address,
                    nonce=auth.nonce,
                    since_s=since,
                    now=self.payer.now(),
                )
                if found[0] or look == CHAIN_LOOKS - 1:
                    break
                # The send that settled it may still be confirming.
                await asyncio.sleep(CHAIN_LOOK_S)
        except X402LabError as exc:  # the chain cannot be asked now: reconcile() will
            found, unasked = None, f"the chain could not be asked: {exc}"
        state.pending = None
        self.payer.answer_lost(ticket, found, outcome, unasked)


def no_answer(exc: httpx.HTTPError) -> Outcome:
    """The outcome of a paid send that got no answer (a timeout, a dropped connection)."""
    said = f": {exc}" if "timeout_s" in str(exc) else ""  # a deadline names its limit
    return Outcome(Kind.RESEND, f"{type(exc).__name__} after it was sent{said}")
