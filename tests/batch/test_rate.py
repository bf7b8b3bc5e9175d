"""The adaptive limit's controller (``batch.concurrency``) on a fake clock: no sockets, no sleep."""

from __future__ import annotations

import math

import pytest

from x402lab.batch.concurrency import AutoConcurrency, concurrency_of
from x402lab.batch.concurrency._rate import (
    BETA,
    CATCH_UP_S,
    DOUBLE_S,
    FIRST_MARGIN,
    GROWTH,
    HOLD_S,
    MAX_PAUSE_S,
    START_WINDOW,
    Peer,
    RateController,
)
from x402lab.errors import ConfigError


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _answer(controller: RateController, clock: Clock, latency: float = 0.05) -> None:
    started = controller.start()
    clock.advance(latency)
    controller.answered(started)


def _limited_at(controller: RateController, clock: Clock, sent: int) -> None:
    """A request meets a 429 after the wallet sent ``sent`` requests, evenly over the second
    before it (the first time: the bucket, full a second ago, ran dry)."""
    started = controller.start()
    at = [started - 1 + i / sent for i in range(sent)]
    clock.advance(0.05)
    controller.limited_429(started, 0.05, wallet_sent=at)
    controller.released()


def _round_trip(controller: RateController, clock: Clock, latency: float) -> None:
    """A full window of requests sent together and answered ``latency`` later."""
    started = [controller.start() for _ in range(controller.window_limit)]
    clock.advance(latency)
    for at in started:
        controller.answered(at)


def test_with_no_limit_known_the_window_doubles_per_double_s_at_most_once_a_round_trip():
    clock = Clock()
    slow = RateController(ceiling=64, clock=clock)
    assert slow.window_limit == START_WINDOW == 2 and math.isinf(slow.rate)
    # Answers slower than DOUBLE_S: the window doubles every round trip (TCP's slow start).
    for expected in (4, 8, 16, 32, 64, 64):
        _round_trip(slow, clock, latency=1.0)
        assert slow.window_limit == expected  # never above the ceiling
    # Faster answers: it doubles every DOUBLE_S, not every round trip.
    for latency in (0.25, 0.05):
        fast = RateController(ceiling=64, clock=clock)
        began = clock.now
        while clock.now - began < 3 * DOUBLE_S - 1e-9:
            _round_trip(fast, clock, latency)
        # about three doublings (whole requests are sent: a little more), not one per round
        # trip (7 of them at 250 ms, 36 at 50 ms)
        assert 2**3.5 < fast.window < 2**5
    assert slow.delay() == 0  # no rate: nothing waits but for the window


def test_the_window_never_more_than_doubles_within_double_s():
    clock = Clock()
    controller = RateController(ceiling=1024, clock=clock)
    _round_trip(controller, clock, latency=0.5)  # a slow first answer (a connection made)
    start = controller.window
    began = clock.now
    while clock.now - began < 2 * DOUBLE_S:  # then fast ones, while the latency seen lags
        _round_trip(controller, clock, latency=0.01)
    # about two doublings (without the bound, the long latency first seen made it 7x)
    assert 2 * start < controller.window <= 2**2.4 * start


def test_a_window_the_batch_does_not_fill_is_not_grown():
    clock = Clock()
    idle = RateController(ceiling=64, clock=clock)
    for _ in range(20):  # one request now and then: 50 ms answers a second apart
        _answer(idle, clock, latency=0.05)
        clock.advance(1.0)
    assert idle.window_limit == START_WINDOW
    busy = RateController(ceiling=64, clock=clock)
    for _ in range(20):
        _round_trip(busy, clock, latency=0.05)
    assert busy.window_limit > START_WINDOW


def test_a_429_sets_the_rate_and_answers_raise_it_additively():
    clock = Clock()
    controller = RateController(clock=clock)
    for _ in range(30):
        _answer(controller, clock, latency=0.04)
    _limited_at(controller, clock, sent=40)
    # 40 taken over the last second, a burst of one second's worth among them: about 20/s,
    # less a margin (the bucket, empty now, needs to fill again).
    first = controller.rate
    assert first == pytest.approx(FIRST_MARGIN * 40 / 2, rel=0.05)
    assert controller.limited == 1
    # Ten seconds of answers add GROWTH x the rate of the cut, per second.
    for _ in range(100):
        _answer(controller, clock, latency=0.1)
    assert controller.rate == pytest.approx(first * (1 + GROWTH * 10), rel=0.02)
    assert controller.peak_rate == controller.rate


def test_a_cut_is_multiplicative_and_once_per_congestion_event():
    clock = Clock()
    controller = RateController(clock=clock)
    _limited_at(controller, clock, sent=40)
    rate = controller.rate
    # Requests started before that cut meet their 429s afterwards: the same event.
    early = [controller.start() for _ in range(3)]
    clock.advance(0.01)
    controller.limited_429(controller.start(), 0.0)  # started after the cut: a new event
    assert controller.rate == pytest.approx(BETA * rate)
    for started in early:
        controller.limited_429(started - 1.0, 0.0)
    assert controller.rate == pytest.approx(BETA * rate)
    assert controller.limited == 5


def test_starts_are_paced_at_the_rate_and_a_429_resend_takes_a_paced_place():
    clock = Clock()
    controller = RateController(clock=clock)
    _limited_at(controller, clock, sent=22)  # about 10 requests a second
    interval = 1 / controller.rate
    # After the cut the next request starts one interval later: the bucket holds one by then.
    assert controller.delay() == pytest.approx(interval)
    clock.advance(1.0)
    controller.start()
    controller.released()
    # (a start may make up for a sleep that overshot, up to CATCH_UP_S)
    assert controller.delay() == pytest.approx(interval - CATCH_UP_S)
    # Two requests meet 429s at once: they are sent again one interval apart, not together.
    first, second = controller.retry_in(0.0), controller.retry_in(0.0)
    assert second - first == pytest.approx(interval)


def test_a_long_retry_after_pauses_new_requests_once_but_never_pins_the_rate():
    clock = Clock()
    controller = RateController(clock=clock)
    _limited_at(controller, clock, sent=40)
    rate = controller.rate
    clock.advance(HOLD_S)
    controller.limited_429(controller.start(), 3600.0)
    controller.released()
    assert controller.rate == pytest.approx(BETA * rate)  # one cut, as for any 429
    assert controller.delay() == pytest.approx(MAX_PAUSE_S)  # honoured, up to a bound
    clock.advance(MAX_PAUSE_S)
    assert controller.delay() == 0
    # After the pause the rate grows back as after any cut: the long wait set nothing.
    for _ in range(200):
        _answer(controller, clock, latency=0.1)
    assert controller.rate > rate


def test_with_a_rate_the_window_follows_it():
    clock = Clock()
    controller = RateController(ceiling=64, clock=clock)
    for _ in range(10):
        _answer(controller, clock, latency=0.5)
    _limited_at(controller, clock, sent=42)
    # about 20 requests a second at half a second each: some 10 in flight, with headroom
    assert 10 <= controller.window_limit <= 20


def test_processes_of_a_wallet_send_shares_of_one_rate_and_a_cut_reaches_them_all():
    clock = Clock()
    alone = RateController(clock=clock)
    _limited_at(alone, clock, sent=60)
    wallet = alone.wallet_rate
    joining = RateController(clock=clock)
    joining.merge([alone.shared()])  # starts at the learned rate, not with 429s
    alone.merge([joining.shared()])
    assert joining.wallet_rate == wallet and joining.members == alone.members == 2
    assert joining.rate == alone.rate == pytest.approx(wallet / 2)
    clock.advance(HOLD_S + 0.1)
    joining.limited_429(joining.start(), 0.0)
    alone.merge([joining.shared()])
    assert alone.wallet_rate == joining.wallet_rate == pytest.approx(BETA * wallet)
    # A process gone quiet no longer counts; its rate is remembered for the next run.
    last_word = joining.shared()
    clock.advance(10)
    alone.merge([last_word])
    assert alone.members == 1 and alone.rate == alone.wallet_rate
    later = RateController(clock=clock)
    later.merge([Peer(None, 15.0, 0.0, clock.now - 60)])
    assert later.wallet_rate == 15.0


def test_the_first_estimate_is_the_rate_whose_bucket_those_requests_would_empty():
    clock = Clock()
    # A bucket of 20/s holding one second's worth: 10 requests a second for 5 s leave it
    # full; then 40 a second empty it after 20 / (40 - 20) = 1 s.
    sent = [clock.now + i / 10 for i in range(50)] + [clock.now + 5 + i / 40 for i in range(40)]
    clock.advance(6.0)
    for controller in (RateController(clock=clock), RateController(clock=clock)):
        flying = controller.start()
        controller.limited_429(flying, 0.05, wallet_sent=sent)
        assert controller.rate == pytest.approx(FIRST_MARGIN * 20, rel=0.05)
    # Without the ledger's record, this process's own answers stand for the wallet's.
    alone = RateController(clock=clock)
    for at in sent:
        clock.now = at
        started = alone.start()
        alone.answered(started)
    flying = alone.start()
    clock.advance(0.01)
    alone.limited_429(flying, 0.05)
    assert alone.rate == pytest.approx(FIRST_MARGIN * 20, rel=0.05)


def test_processes_looking_for_the_limit_together_share_the_start_window():
    clock = Clock()
    controller = RateController(clock=clock)
    controller.merge([Peer(None, None, 0.0, clock.now)] * 3)
    assert controller.members == 4 and controller.window_limit == 1
    # Once answers come, each sends its share of the wallet's window over a round trip: four
    # of them together send what one alone would.
    _answer(controller, clock, latency=0.05)
    controller.start()
    controller.released()
    assert controller.delay() == pytest.approx(0.05 * 4 / controller.window - CATCH_UP_S)


def test_concurrency_arguments():
    assert concurrency_of("auto") == AutoConcurrency()
    assert concurrency_of(AutoConcurrency(ceiling=128)).ceiling == 128
    assert concurrency_of(8) == 8
    for bad in ("fast", 0, 2000, True, 1.5):
        with pytest.raises(ConfigError, match='concurrency must be "auto"'):
            concurrency_of(bad)
    with pytest.raises(ConfigError, match="ceiling must be an int"):
        AutoConcurrency(ceiling=0)
