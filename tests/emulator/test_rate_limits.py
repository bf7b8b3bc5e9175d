"""The emulator's rate limits (token buckets per payer), over real sockets."""

from __future__ import annotations

import time

import httpx
import pytest

from x402lab.cli import build_parser
from x402lab.emulator.limits import RateLimits
from x402lab.emulator.settings import EmulatorSettings
from x402lab.errors import ConfigError
from x402lab.x402.codec import decode_header

CHAT = "/api/v1/chat/completions"
HELLO = {"model": "zai-org-glm-4.7-flash", "messages": [{"role": "user", "content": "hello"}]}


def _challenge(gateway_url: str) -> dict:
    response = httpx.post(f"{gateway_url}{CHAT}", json=HELLO)
    assert response.status_code == 402, response.text
    return decode_header(response.headers["payment-required"])


def _stats(gateway_url: str) -> dict:
    return httpx.get(f"{gateway_url}/api/x402/stats").json()


def test_an_empty_bucket_answers_429_with_retry_after(emulator_factory):
    emulator = emulator_factory(rate_limit_rpm=60)  # one request a second, a bucket of one
    url = emulator.gateway_url
    started = time.monotonic()
    assert httpx.post(f"{url}{CHAT}", json=HELLO).status_code == 402
    limited = httpx.post(f"{url}{CHAT}", json=HELLO)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert limited.status_code == 429
    assert limited.json()["error"] == "rate_limited"
    assert limited.headers["retry-after"] == "1"
    # The wait left is the second the emptied bucket needs, less what passed since it was
    # emptied (at most the time both requests took: a loaded machine may take 100 ms or more).
    assert 1000 - elapsed_ms - 5 <= int(limited.headers["retry-after-ms"]) <= 1000
    # Free catalog routes draw on no bucket.
    assert all(httpx.get(f"{url}/api/v1/models").status_code == 200 for _ in range(3))
    stats = _stats(url)
    assert stats["limits"] == {"rateLimited": 1}
    assert stats["payments"]["faults"]["rateLimited"] == 0


def test_a_limited_paid_request_is_not_charged_and_settles_once_when_sent_again(
    emulator_factory, payer
):
    emulator = emulator_factory(rate_limit_rpm=60)
    url = emulator.gateway_url
    challenge = _challenge(url)  # the client's address's bucket, not the payer's
    first = httpx.post(f"{url}{CHAT}", json=HELLO, headers={"X-Payment": payer.header(challenge)})
    assert first.status_code == 200, first.text
    balance = emulator.chain.balance_of(payer.address)
    header = payer.header(challenge)
    limited = httpx.post(f"{url}{CHAT}", json=HELLO, headers={"X-Payment": header})
    assert limited.status_code == 429
    assert "payment-response" not in limited.headers
    assert emulator.chain.balance_of(payer.address) == balance
    assert len(emulator.chain.transfers()) == 1
    assert _stats(url)["payments"]["verified"] == 1  # the limited payment was not even verified
    time.sleep(int(limited.headers["retry-after-ms"]) / 1000)
    again = httpx.post(f"{url}{CHAT}", json=HELLO, headers={"X-Payment": header})
    assert again.status_code == 200, again.text
    assert len(emulator.chain.transfers()) == 2
    assert emulator.chain.balance_of(payer.address) == balance - 10_000


def test_each_payer_has_its_own_bucket(emulator_factory, payer, other_payer):
    emulator = emulator_factory(rate_limit_rpm=60)
    url = emulator.gateway_url
    challenge = _challenge(url)
    for who in (payer, other_payer):
        response = httpx.post(
            f"{url}{CHAT}", json=HELLO, headers={"X-Payment": who.header(challenge)}
        )
        assert response.status_code == 200, response.text
    assert _stats(url)["limits"]["rateLimited"] == 0


def test_tokens_count_prompt_and_max_tokens():
    now = [0.0]
    limits = RateLimits(None, 600, clock=lambda: now[0])  # 10 tokens a second, a bucket of 10
    assert limits.admit("a", tokens=4) is None
    assert limits.admit("a", tokens=6) is None
    assert limits.admit("a", tokens=1) == pytest.approx(0.1)
    # A request larger than the bucket waits for a full one and leaves it in debt.
    now[0] = 1.0
    assert limits.admit("a", tokens=50) is None
    assert limits.admit("a", tokens=1) == pytest.approx(4.1)
    assert limits.stats() == {"rateLimited": 2}


def test_the_gateway_counts_a_chat_as_its_prompt_plus_max_tokens(emulator_factory):
    emulator = emulator_factory(rate_limit_tpm=600)
    url = emulator.gateway_url
    body = {**HELLO, "max_tokens": 40}
    assert httpx.post(f"{url}{CHAT}", json=body).status_code == 402
    limited = httpx.post(f"{url}{CHAT}", json=body)
    assert limited.status_code == 429
    # about 40 + 6 tokens of prompt went over a bucket of 10: some 4 s of debt to repay
    assert 3000 < int(limited.headers["retry-after-ms"]) < 5000


def test_the_429_fault_stays_a_fault(emulator_factory):
    emulator = emulator_factory(rate_limit_rpm=6000, rate_429=1.0)
    assert httpx.post(f"{emulator.gateway_url}{CHAT}", json=HELLO).status_code == 429
    stats = _stats(emulator.gateway_url)
    assert stats["payments"]["faults"]["rateLimited"] == 1
    assert stats["limits"]["rateLimited"] == 0


def test_bad_limits_are_refused_and_serve_takes_them_as_flags():
    with pytest.raises(ConfigError, match="rate_limit_rpm must be a positive int"):
        EmulatorSettings(rate_limit_rpm=0)
    with pytest.raises(ConfigError, match="rate_limit_tpm"):
        EmulatorSettings(rate_limit_tpm=1.5)  # type: ignore[arg-type]
    args = build_parser().parse_args(["serve", "--rpm", "1200", "--tpm", "90000"])
    assert (args.rpm, args.tpm) == (1200, 90000)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--rpm", "0"])
