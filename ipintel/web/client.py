"""The caller's address (docs/API.md#client-address): the socket peer, or what a trusted proxy says.

Forwarding headers are believed only when the socket peer is one of
``IPINTEL_TRUSTED_PROXIES``; then the right-most address that is not itself a
trusted proxy is the client (addresses to its left were written by the
client and can be forged).
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ipintel.addresses import IPAddress, canonical
from ipintel.errors import ApiError
from ipintel.infra.limiter import Decision, Quota, RateLimiter
from ipintel.infra.shared import SharedRateLimiter

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Buckets:
    """The rate limiter a caller's tokens come from: the server's, or an API key's own; in process, and with
    ``IPINTEL_REDIS_URL`` the shared one in front of it."""

    local: RateLimiter
    shared: SharedRateLimiter | None = None

    async def take(self, key: str, quota: Quota) -> Decision:
        shared = self.shared
        return await shared.take(key, quota) if shared is not None else self.local.take(key, quota)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request, worked out once by the gate before routing and passed on in
    ``scope["state"]["caller"]``: every route, tool and log line that needs the caller reads this.

    ``ip`` is the canonical address (``None`` without a socket peer); ``key`` its rate-limit bucket (the IPv4
    address, the IPv6 /64, or ``key:<name>`` with an API key); ``api_key`` the name of the key presented (never
    the key); ``buckets`` where its tokens come from (``None``: limits are off)."""

    ip: str | None
    key: str
    api_key: str | None = None
    buckets: Buckets | None = None

    async def spend(self, quota: Quota) -> None:
        """Spend one more token of ``quota`` beyond the request's own (docs/API.md#rate-limits): an MCP
        ``tools/call`` its tool's, a profile or batch one per address and part that asks an upstream. A spent
        quota raises ``rate_limited``, which is answered in that tool's or part's place."""
        buckets = self.buckets
        if buckets is None:
            return
        decision = await buckets.take(self.key, quota)
        if not decision.allowed:
            wait = max(1, math.ceil(decision.retry_after or 1))
            raise ApiError(
                "rate_limited",
                f"the {quota} rate limit is spent; call again in {wait} s",
                headers={"Retry-After": str(wait)},
            )


def caller_of(scope: Mapping[str, Any]) -> Caller:
    """The request's :class:`Caller`; the request middleware sets it before any route runs."""
    caller: Caller = scope["state"]["caller"]
    return caller


_FORWARDED_FOR = re.compile(r'for\s*=\s*("?)(\[[^\]]*\]|[^;,"\s]*)\1', re.IGNORECASE)


# "[" + 45 characters of IPv6 text + "]:65535": anything longer is not an address.
_MAX_HOP = 56


def _parse(text: str) -> IPAddress | None:
    text = text.strip().strip('"')
    if len(text) > _MAX_HOP or "%" in text:
        # A zone id (fe80::1%eth0) names an interface of someone else's machine:
        # not an address anyone can be looked up or rate-limited by.
        return None
    if text.startswith("["):  # Forwarded: for="[2001:db8::1]:4711"
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return canonical(ip)


def _trusted(ip: IPAddress, proxies: Sequence[Network]) -> bool:
    return any(ip.version == net.version and ip in net for net in proxies)


def client_address(peer: str | None, headers: dict[str, str] | object, proxies: Sequence[Network]) -> IPAddress | None:
    """The client's address for this request, or ``None`` when the peer is unknown."""
    peer_ip = _parse(peer) if peer else None
    if peer_ip is None or not proxies or not _trusted(peer_ip, proxies):
        return peer_ip
    get_all = getattr(headers, "getlist", None)
    chain: list[str] = []
    if get_all is not None:
        for value in get_all("x-forwarded-for"):
            chain.extend(part for part in value.split(",") if part.strip())
        if not chain:
            for value in get_all("forwarded"):
                chain.extend(m.group(2) for m in _FORWARDED_FOR.finditer(value))
    for item in reversed(chain):
        ip = _parse(item)
        if ip is None:
            # A garbled hop: we cannot tell who is behind it, so the last
            # address we could verify (the proxy's) is the safest answer.
            return peer_ip
        if not _trusted(ip, proxies):
            return ip
        peer_ip = ip
    return peer_ip
