"""Every kind of request the lab makes honours the environment's proxy as httpx does: the
catalog, a paid chat, a batch, a stream, the chain's JSON-RPC and the openai-python client
all go through a real tinyproxy when ``HTTP_PROXY`` names it, and none does when
``NO_PROXY`` names 127.0.0.1 (httpx does not skip the proxy for loopback by itself)."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

import x402lab as xl
from x402lab.transport.environment import environment_proxies

from .conftest import Proxy

MODEL = "zai-org-glm-4.7-flash"
CHAT = "/api/v1/chat/completions"


def _proxy_env(monkeypatch: pytest.MonkeyPatch, proxy_url: str, no_proxy: str) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.setenv("HTTPS_PROXY", proxy_url)
    monkeypatch.setenv("NO_PROXY", no_proxy)


def _openai_chat(lab: xl.Lab) -> None:
    with lab.openai(max_retries=0) as client:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=8
        )


def _every_kind(lab: xl.Lab, proxy: Proxy, wait: bool) -> dict[str, int]:
    """Each kind of request once; how many requests of each the proxy forwarded (its log is
    written as it forwards: with ``wait``, up to 5 s for each kind to show up)."""
    gateway = urlsplit(lab.gateway_url).netloc
    chain = urlsplit(lab.chain_rpc_url).netloc
    steps = {
        "catalog": (f"{gateway}/api/v1/models", lambda: lab.models()),
        "paid chat": (gateway + CHAT, lambda: lab.chat("hello", model=MODEL, max_tokens=8)),
        "batch": (
            gateway + CHAT,
            lambda: lab.batch_chat(["a", "b", "c"], model=MODEL, max_tokens=8, progress=None),
        ),
        "stream": (
            gateway + CHAT,
            lambda: lab.chat_stream("stream it", model=MODEL, max_tokens=8).collect(),
        ),
        "chain": (chain, lambda: lab.reconcile()),
        "openai": (gateway + CHAT, lambda: _openai_chat(lab)),
    }
    counts = {}
    for name, (fragment, step) in steps.items():
        before = proxy.count(fragment)
        step()
        deadline = time.monotonic() + (5 if wait else 0)
        while (found := proxy.count(fragment)) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        counts[name] = found - before
    return counts


def test_every_kind_of_request_goes_through_the_proxy(proxy, monkeypatch, tmp_path):
    _proxy_env(monkeypatch, proxy.url, "")
    with xl.connect(ledger=tmp_path / "ledger.sqlite") as lab:
        counts = _every_kind(lab, proxy, wait=True)
    assert all(n > 0 for n in counts.values()), counts
    assert counts["batch"] >= 3  # every paid call of the batch


def test_no_proxy_for_127_0_0_1_sends_nothing_through_it(proxy, monkeypatch, tmp_path):
    _proxy_env(monkeypatch, proxy.url, "127.0.0.1")
    with xl.connect(ledger=tmp_path / "ledger.sqlite") as lab:
        counts = _every_kind(lab, proxy, wait=False)
        time.sleep(0.5)  # anything forwarded would be in the log by now
    assert counts == dict.fromkeys(counts, 0)
    assert proxy.requests() == []


PROXY = "http://127.0.0.1:3128"


@pytest.mark.parametrize(
    ("no_proxy", "bypassed"),
    [
        ("", {}),
        ("127.0.0.1", {"all://127.0.0.1": None}),
        ("localhost, example.com", {"all://localhost": None, "all://*example.com": None}),
        ("::1", {"all://[::1]": None}),
        ("http://internal:8080", {"http://internal:8080": None}),
    ],
)
def test_the_environment_becomes_mounts_as_httpx_reads_it(monkeypatch, no_proxy, bypassed):
    _proxy_env(monkeypatch, PROXY, no_proxy)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    assert environment_proxies() == {
        "http://": PROXY,
        "https://": PROXY,
        "all://": "socks5://127.0.0.1:1080",
        **bypassed,
    }


def test_no_proxy_star_turns_every_proxy_off(monkeypatch):
    _proxy_env(monkeypatch, PROXY, "*")
    assert environment_proxies() == {}
