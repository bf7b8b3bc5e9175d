"""The adaptive limit of a batch (``concurrency="auto"``): request rate and requests in flight.

A pure state machine with an injected clock; ``_limit`` drives it from the event loop
and ``_rate_share`` shares it through the ledger. The rules:

- **No limit known** (no 429 met yet, none learned from other processes): no rate limit, and
  the in-flight window starts at ``START_WINDOW`` and doubles every ``DOUBLE_S`` (once a round
  trip at most) up to the ceiling. Processes of the wallet looking for the limit together
  share that window: each sends its share of it, paced over a round trip.
- **A 429**: the first one of a congestion event (from a request started after the last cut)
  cuts the rate multiplicatively, to ``BETA`` times the rate (the first time, when no rate was
  set, to ``FIRST_MARGIN`` times what the service accepted over the last second, less a
  burst); the next request starts one interval later. Later
  429s of requests sent before that cut are the same event and cut nothing. New requests
  wait for ``Retry-After`` (at most ``MAX_PAUSE_S``: a long one pauses the batch once, it
  never sets its rate).
- **Answers** raise the rate additively, ``GROWTH`` times the rate of the last cut per second
  (so the saw-tooth below the server's limit has the same shape at any scale). With a rate
  known, the window follows it: enough requests in flight to keep that rate at the observed
  latency, with headroom.
- **Processes of one wallet** control one rate, the wallet's, and each sends its share of it
  (``merge``; ``_rate_share`` carries it through the ledger).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

#: Requests in flight when no limit is known.
START_WINDOW = 2
#: While no limit is known, the window doubles every this many seconds, and at most once a
#: round trip (TCP's slow start, in time rather than in round trips): at 250 ms answers two
#: requests in flight become 32 within about two and a half seconds, while with 50 ms
#: answers the rate grows no faster, so that few requests are in flight when a bucket's
#: burst runs out and the first 429 comes back. (Simulated against a 20/s bucket with 50 ms
#: answers, one process and four: 3-4 429s while looking for the limit, as with a start of
#: one or doubling every 0.75 s; at 250 ms without a limit 95 rows/s, against 84 for those.)
DOUBLE_S = 0.6
#: Default ceiling of requests in flight for ``concurrency="auto"``.
DEFAULT_CEILING = 64
#: The multiplicative cut on a 429.
BETA = 0.85
#: The first cut: the estimated limit times this (the estimate may be above the limit, and
#: the bucket, empty at the first 429, needs a margin to fill again).
FIRST_MARGIN = 0.9
#: Additive increase per second, as a share of the rate at the last cut.
GROWTH = 0.01
#: The longest pause one Retry-After imposes on new requests.
MAX_PAUSE_S = 30.0
#: Seconds of history behind the first estimate of a limit.
MEASURE_S = 10.0
#: The burst a service's bucket is assumed to let through before its first 429, in seconds
#: of its rate (what a token bucket commonly holds).
BURST_S = 1.0
#: Cuts this close together are one event, whichever processes met it.
HOLD_S = 1.0
#: Another process counts as sharing the limit while its last word is this recent.
ACTIVE_S = 3.0
#: How late a paced start may be made up for (an event loop's sleeps overshoot).
CATCH_UP_S = 0.02


@dataclass(frozen=True)
class Peer:
    """What another process paying from the same wallet last said of the limit."""

    rate: float | None  # its own request rate, None while it knows no limit
    wallet_rate: float | None  # the rate of all the wallet's processes together
    cut_at: float  # the clock time of its last cut (0: none)
    seen_at: float


class RateController:
    """Request rate and in-flight window, increased on answers and cut on 429s.

    The controlled value is the wallet's rate (``wallet_rate``: what every process paying
    from it may send together, inf while no limit is known); this process sends its share,
    ``rate`` = wallet_rate / members. Every process grows its copy of the wallet's rate at the
    same pace (per second, not per answer), so the copies agree without being sent around;
    a cut is sent around (``merge``).
    """

    def __init__(
        self,
        *,
        ceiling: int = DEFAULT_CEILING,
        clock: Callable[[], float],
        start_window: int = START_WINDOW,
    ) -> None:
        if ceiling < 1:
            raise ValueError("ceiling must be >= 1")
        self.ceiling = ceiling
        self._clock = clock
        self.wallet_rate = math.inf
        self.window = float(min(start_window, ceiling))
        self.in_flight = 0
        self.limited = 0  # 429s met
        self.peak_rate = 0.0  # the highest finite rate this process reached
        self.members = 1  # processes sharing the limit, this one included
        self.cut_at = 0.0
        self._cut_base = 0.0  # the wallet's rate right after the last cut
        self._next_at = 0.0
        self._paused_until = 0.0
        self._grown_at: float | None = None
        self._latency = 0.0  # seconds, a moving average of answered requests
        self._accepted: deque[float] = deque()  # when the service took a request
        self._mark = (clock(), self.window)  # the window DOUBLE_S ago at most, and when

    @property
    def latency(self) -> float:
        """Seconds from start to answer, a moving average (0 before the first answer)."""
        return self._latency

    @property
    def rate(self) -> float:
        """This process's request rate (requests a second; inf while no limit is known)."""
        return self.wallet_rate / self.members

    # -- what may start --------------------------------------------------------------------

    def delay(self) -> float | None:
        """Seconds until one more request may start (0: now), or None while the window is
        full (wait for an answer)."""
        if self.in_flight >= self.window_limit:
            return None
        now = self._clock()
        return max(0.0, self._paused_until - now, self._next_at - now)

    @property
    def window_limit(self) -> int:
        window = self.window
        if math.isinf(self.rate):
            # Growing: a request more as soon as the window has grown past a whole one.
            # Processes looking for the limit together share the window: each its share
            # (its starts paced at that share, ``_interval``).
            window = math.ceil(window / self.members)
        return max(1, min(self.ceiling, math.floor(window)))

    def start(self) -> float:
        """A request starts now; returns its start time (give it back to ``answered`` or
        ``limited_429``)."""
        now = self._clock()
        self.in_flight += 1
        interval = self._interval()
        if interval:
            self._next_at = max(self._next_at, now - CATCH_UP_S) + interval
        return now

    def _interval(self) -> float:
        """Seconds between two starts: 1 / rate; while no limit is known, this process's
        share of the wallet's window spread over a round trip (processes looking for the
        limit together send, all of them, what one alone would); 0: unpaced."""
        if math.isfinite(self.rate):
            return 1.0 / self.rate
        if self._latency and self.members > 1:
            return self._latency * self.members / self.window
        return 0.0

    def retry_in(self, retry_after_s: float) -> float:
        """Seconds the request that met a 429 should wait before it is sent again: the
        server's ``Retry-After``, or longer if the rate asks for it. Its paced place is
        taken now, so requests sent again after one 429 go out spread, not together."""
        now = self._clock()
        at = max(now + max(retry_after_s, 0.0), self._paused_until, self._next_at)
        interval = self._interval()
        if interval:
            self._next_at = at + interval
        return at - now

    def resend(self) -> float:
        """A request that met a 429 is sent again now (its paced place was taken by
        ``retry_in``); returns its new start time."""
        return self._clock()

    # -- what came back --------------------------------------------------------------------

    def answered(self, started: float) -> None:
        """A request started at ``started`` got its answer (not a 429)."""
        now = self._clock()
        self.in_flight = max(0, self.in_flight - 1)
        latency = max(0.0, now - started)
        self._latency = latency if self._latency == 0 else 0.8 * self._latency + 0.2 * latency
        if math.isinf(self.wallet_rate):
            self._accepted.append(now)
            _trim(self._accepted, now - MEASURE_S)
            self._grow(now)
            return
        since = now - (self._grown_at if self._grown_at is not None else now)
        self._grown_at = now
        self.wallet_rate += GROWTH * self._cut_base * min(since, 1.0)
        self.peak_rate = max(self.peak_rate, self.rate)
        self._follow_rate()

    def _grow(self, now: float) -> None:
        """One answer more while no limit is known: the window doubles every DOUBLE_S, once a
        round trip at most, and never more than twice what it was DOUBLE_S before (a busy
        process sees a latency longer than the service takes, and would grow it faster).
        Each of several processes looking together grows by its own answers: the wallet's
        window grows slower, the more of them look (fewer 429s when they find the limit). A
        window the batch does not fill (a busy process, few rows left) is not grown, or it
        would let out a burst far above any rate it was seen to work at."""
        span = max(2 * self._latency, 0.2)
        answers = len(self._accepted) - bisect.bisect_left(self._accepted, now - span)
        allowed = self.window / self.members / max(self._latency, 0.001) * span
        if answers < 0.25 * allowed:
            return  # the window is not used
        marked_at, marked = self._mark
        if now - marked_at >= DOUBLE_S:
            self._mark = marked_at, marked = now, self.window
        grow = min(1.0, math.log(2) * self._latency / DOUBLE_S)
        self.window = min(float(self.ceiling * self.members), 2 * marked, self.window + grow)

    def released(self) -> None:
        """A request ended without an answer worth learning from (a failure)."""
        self.in_flight = max(0, self.in_flight - 1)

    def limited_429(
        self,
        started: float,
        retry_after_s: float | None,
        *,
        wallet_sent: Sequence[float] | None = None,
    ) -> None:
        """A request started at ``started`` met a 429 (``Retry-After`` in seconds, if sent).
        ``wallet_sent``: when every process of the wallet sent its requests over the last
        ``MEASURE_S`` (from the ledger), for the first estimate of the limit."""
        now = self._clock()
        self.limited += 1
        if retry_after_s is not None:
            self._paused_until = max(
                self._paused_until, now + min(max(retry_after_s, 0.0), MAX_PAUSE_S)
            )
        if started < self.cut_at:
            return  # sent before the last cut: the same congestion event
        if math.isfinite(self.wallet_rate):
            rate = BETA * self.wallet_rate
        else:  # an estimate that leaves the burst out, less a margin for its error
            rate = FIRST_MARGIN * self._first_estimate(now, wallet_sent)
        self._set_cut(rate, now)
        self.peak_rate = max(self.peak_rate, self.rate)

    def _first_estimate(self, now: float, wallet_sent: Sequence[float] | None) -> float:
        """The wallet's limit, at its first 429: the highest rate whose bucket (holding
        ``BURST_S`` of it, full at the first request) the requests the service took would
        have emptied by now. Those still in flight are left out: sent after the bucket ran
        dry, most of them meet a 429 too."""
        if wallet_sent is not None:  # taken a round trip after they were sent
            taken, weight = [t + self._latency for t in wallet_sent], 1
            taken = [t for t in taken if t <= now]
        else:  # this process's share of them
            taken, weight = list(self._accepted), self.members
        if not taken:
            return 1.0
        low, high = 0.0, weight * len(taken) / BURST_S + 1.0
        for _ in range(30):
            rate = (low + high) / 2
            if _empties(sorted(taken), weight, rate, now):
                low = rate
            else:
                high = rate
        return max(low, 1.0)

    def _set_cut(self, wallet_rate: float, at: float) -> None:
        self.wallet_rate = self._cut_base = max(wallet_rate, 0.1)
        self.cut_at = at
        now = self._grown_at = self._clock()
        # The next start one interval on: the bucket, empty at a 429, holds a request again
        # by then, and processes that hear of one cut do not all start again at once.
        self._next_at = max(self._next_at, now + 1.0 / self.rate)
        self._follow_rate()

    def _follow_rate(self) -> None:
        # Little's law: rate x latency requests are in flight; half again as headroom.
        needed = self.rate * max(self._latency, 0.001) * 1.5 + 1
        self.window = max(1.0, min(float(self.ceiling), needed))

    # -- sharing with other processes ------------------------------------------------------

    def merge(self, peers: Iterable[Peer]) -> None:
        """Take in what the other processes paying from this wallet said: how many they
        are (each sends its share of the wallet's rate), their cuts, and, while this one
        knows no limit, the rate they learned (or, when none runs now, the last one did)."""
        now = self._clock()
        peers = list(peers)
        active = [p for p in peers if now - p.seen_at <= ACTIVE_S]
        self.members = len(active) + 1
        known = [p for p in active if p.wallet_rate is not None]
        if math.isinf(self.wallet_rate):
            source = max(known, key=lambda p: p.cut_at, default=None)
            if source is None:
                remembered = [p for p in peers if p.wallet_rate is not None]
                source = max(remembered, key=lambda p: p.seen_at, default=None)
            if source is not None and source.wallet_rate is not None:
                self._set_cut(source.wallet_rate, source.cut_at)
        elif known:
            newest = max(known, key=lambda p: p.cut_at)
            assert newest.wallet_rate is not None
            if newest.cut_at > self.cut_at + HOLD_S:
                # Another process met the limit since this one did: a cut for all.
                self._set_cut(BETA * self.wallet_rate, newest.cut_at)
        if math.isfinite(self.wallet_rate):  # the share changes with the members
            self._follow_rate()
            self.peak_rate = max(self.peak_rate, self.rate)

    def shared(self) -> Peer:
        """What this process tells the others (see ``merge``)."""
        finite = math.isfinite(self.wallet_rate)
        rate = self.rate if finite else None
        return Peer(rate, self.wallet_rate if finite else None, self.cut_at, self._clock())


def _empties(taken: list[float], weight: int, rate: float, now: float) -> bool:
    """Whether a bucket refilled at ``rate`` a second (holding ``BURST_S`` of it, full at
    ``taken[0]``) holds less than one request at ``now`` after giving ``weight`` at each of
    ``taken``."""
    capacity = max(rate * BURST_S, 1.0)
    level, at = capacity, taken[0]
    for t in taken:
        level = min(capacity, level + (t - at) * rate) - weight
        at = t
    return min(capacity, level + (now - at) * rate) < 1.0


def _trim(times: deque[float], before: float) -> None:
    while times and times[0] < before:
        times.popleft()
