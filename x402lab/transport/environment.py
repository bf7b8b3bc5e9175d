"""What a lab's HTTP stack reads from its environment as httpx does: proxies, trust store.

The environment is honoured as httpx honours it: ``HTTP_PROXY``, ``HTTPS_PROXY``,
``ALL_PROXY`` and ``NO_PROXY`` become the client's mounts as httpx makes them (a service on
127.0.0.1 goes through the proxy too unless ``NO_PROXY`` names it; a SOCKS proxy goes
through httpx's own transport), ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` the trust store
(else certifi's). ``verify=`` replaces the trust store (a CA bundle path or an
``ssl.SSLContext``).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import ssl
import urllib.request
from typing import Any

import httpx

from x402lab.errors import ConfigError

#: What ``verify=`` takes: True (the environment's trust store, else certifi's), False (no
#: check), a CA bundle's path or an ``ssl.SSLContext``.
Verify = ssl.SSLContext | str | os.PathLike[str] | bool


def ssl_context(verify: Verify = True) -> ssl.SSLContext:
    """The one trust store of a lab (see ``Verify``); raises ConfigError for a CA bundle
    path that cannot be read."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if isinstance(verify, bool):
        environment = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        return _trust_store(verify, *environment)
    path = os.fspath(verify)
    try:
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"verify={path!r} is not a readable CA bundle ({exc}); give the path of a PEM file"
            " of trusted certificates, an ssl.SSLContext, or True"
        ) from None


@functools.lru_cache(maxsize=4)
def _trust_store(verify: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """httpx's context (SSL_CERT_FILE/SSL_CERT_DIR, else certifi), one per process and
    setting: loading the certificates takes about 40 ms of CPU, and every lab would load them
    again (aiohttp shares its default context the same way). A changed variable makes a new
    one."""
    return httpx.create_ssl_context(verify=verify)


def http_options(verify: Verify = True) -> dict[str, Any]:
    """The options of an httpx client of a lab made with httpx's own transport (the clients
    handed to other libraries): the lab's trust store, the environment's proxies (httpx reads
    them itself), no redirects."""
    return {"verify": ssl_context(verify), "trust_env": True, "follow_redirects": False}


def environment_proxies() -> dict[str, str | None]:
    """The proxy of each URL pattern as httpx reads the environment (``trust_env``):
    ``{"http://": proxy, "all://127.0.0.1": None, ...}``, None meaning no proxy. Proxy
    variables come from ``urllib.request.getproxies()`` (either case); in ``NO_PROXY`` "*"
    turns every proxy off, an IP address or "localhost" names that host only, a name with a
    scheme that URL pattern, and any other name that domain and its subdomains."""
    found = urllib.request.getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        url = found.get(scheme)
        if url:
            mounts[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (part.strip() for part in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host, ipaddress.IPv4Address) or host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        elif _is_ip(host, ipaddress.IPv6Address):
            mounts[f"all://[{host}]"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts


def _is_ip(host: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True
