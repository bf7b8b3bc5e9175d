"""The adaptive limit's controller (``batch.rate``) on a fake clock: no sockets, no sleeps."""

from __future__ import annotations

import math

import pytest

from x402lab.batch.pacing import AutoConcurrency, concurrency_of
from x402lab.batch.rate import (
    BETA,
    CATCH_UP_S,
    GROWTH,
    HOLD_S,
    MAX_PAUSE_S,
    SLOW_START_ROUND_S,
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
    """A request meets a 429 after ``sent`` requests went out over the last second."""
    started = controller.start()
    clock.advance(0.05)
    controller.limited_429(started, 0.05, wallet_sent=sent)
    controller.released()


def test_with_no_limit_known_the_window_grows_one_request_per_round_trip_to_the_ceiling():
    clock = Clock()
    controller = RateController(ceiling=10, clock=clock)
    assert controller.window_limit == START_WINDOW and math.isinf(controller.rate)
    for _ in range(START_WINDOW + 1):  # a round trip's answers, at 250 ms each
        _answer(controller, clock, latency=0.25)
    assert controller.window_limit == START_WINDOW + 1
    for _ in range(200):
        _answer(controller, clock, latency=0.25)
    assert controller.window_limit == 10  # never above the ceiling
    # Fast answers grow it by one request per SLOW_START_ROUND_S, not per round trip: 100
    # answers of 50 ms one after another would make a window of about 14, not about 6.
    fast = RateController(ceiling=64, clock=clock)
    for _ in range(100):
        _answer(fast, clock, latency=0.05)
    grown = math.sqrt(START_WINDOW**2 + 2 * 100 * 0.05 / SLOW_START_ROUND_S)
    assert fast.window_limit == math.floor(grown) < 8
    assert controller.delay() == 0  # no rate: nothing waits but for the window


def test_a_429_sets_the_rate_and_answers_raise_it_additively():
    clock = Clock()
    controller = RateController(clock=clock)
    for _ in range(30):
        _answer(controller, clock, latency=0.04)
    _limited_at(controller, clock, sent=40)
    # 40 sent over the last second, a burst of one second's worth among them: about 20/s
    first = controller.rate
    assert first == pytest.approx(40 / 2, rel=0.01)
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


def test_processes_looking_for_the_limit_together_share_the_start_window():
    clock = Clock()
    controller = RateController(clock=clock)
    controller.merge([Peer(None, None, 0.0, clock.now)] * 3)
    assert controller.members == 4 and controller.window_limit == 1


def test_concurrency_arguments():
    assert concurrency_of("auto") == AutoConcurrency()
    assert concurrency_of(AutoConcurrency(ceiling=128)).ceiling == 128
    assert concurrency_of(8) == 8
    for bad in ("fast", 0, 2000, True, 1.5):
        with pytest.raises(ConfigError, match='concurrency must be "auto"'):
            concurrency_of(bad)
    with pytest.raises(ConfigError, match="ceiling must be an int"):
        AutoConcurrency(ceiling=0)
