"""Rate limits (docs/API.md#rate-limits): a token bucket per client and quota, in process. No HTTP here:
the request gate (:mod:`ipintel.web.gate`) decides which quota a request spends and answers the 429.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum

from ipintel.addresses import IPAddress, canonical

Clock = Callable[[], float]


class Quota(StrEnum):
    """The rate-limit quotas (docs/API.md#rate-limits). The values are what clients and operators see:
    ``IPINTEL_RATE_LIMITS`` keys, the ``x-rate-limit-scope`` of the OpenAPI document, the ``scope`` label
    in /metrics and the 429 messages."""

    GENERAL = "general"
    DNS = "dns"
    REGISTRY = "registry"


WINDOW = 60.0  # seconds: the limits are per minute
_EPSILON = 1e-9  # float slack, so that exactly-on-time requests are not refused
_SWEEP_PER_TAKE = 4  # idle buckets examined per request: O(1) work, steady cleanup
# An IPv6 client is its /64: one subscriber usually holds a whole /64 and could otherwise rotate through 2^64 keys.
_V6_PREFIX_MASK = ((1 << 64) - 1) << 64
UNKNOWN_CLIENT = "unknown"  # no socket peer (e.g. a Unix socket): such requests share one bucket


def client_key(ip: IPAddress | str | None) -> str:
    """The rate-limit key of an address: the IPv4 address, or the IPv6 /64 (``2001:db8:1:2::/64``).

    Accepts an address object or text; ``None`` or unparsable text gives
    :data:`UNKNOWN_CLIENT`."""
    if ip is None:
        return UNKNOWN_CLIENT
    if isinstance(ip, str):
        try:
            ip = ipaddress.ip_address(ip)
        except ValueError:
            return UNKNOWN_CLIENT
    ip = canonical(ip)
    if ip.version == 4:
        return str(ip)
    return f"{ipaddress.IPv6Address(int(ip) & _V6_PREFIX_MASK)}/64"


class Decision:
    """The outcome of spending one token: whether it was allowed, and the
    figures the ``RateLimit-*`` headers report (:func:`ipintel.web.gate.rate_limit_headers`)."""

    __slots__ = ("allowed", "limit", "quota", "remaining", "reset", "retry_after")

    def __init__(self, allowed: bool, quota: Quota, limit: int, remaining: int, reset: int, retry_after: int) -> None:
        self.allowed = allowed
        self.quota = quota
        self.limit = limit  # tokens the bucket holds when full
        self.remaining = remaining  # whole tokens left after this request
        self.reset = reset  # seconds until the bucket is full again (0: it is full)
        self.retry_after = retry_after  # seconds until a request would be allowed (0 when allowed)

    def __repr__(self) -> str:
        return (
            f"Decision(allowed={self.allowed}, quota={self.quota!r}, limit={self.limit}, "
            f"remaining={self.remaining}, reset={self.reset}, retry_after={self.retry_after})"
        )


def _ceil(seconds: float) -> int:
    return max(0, math.ceil(seconds - _EPSILON))


class _Buckets:
    """The buckets of one quota: client key -> time the bucket is full again, in LRU order."""

    __slots__ = ("evictions", "interval", "limit", "quota", "times")

    def __init__(self, quota: Quota, limit: int) -> None:
        self.quota = quota
        self.limit = limit
        self.interval = WINDOW / limit  # seconds to earn one token
        # A bucket is one float, the time it will be full again: the "theoretical arrival time" of GCRA, the same
        # algorithm as a token bucket stated with less state. A bucket whose time has passed is full, the same as
        # no bucket, so it can be dropped (_sweep).
        self.times: OrderedDict[str, float] = OrderedDict()
        self.evictions = 0


class RateLimiter:
    """Token buckets per (quota, client). ``take`` spends one token.

    ``clock`` is injectable (monotonic seconds) so tests can move time
    instead of sleeping."""

    def __init__(
        self, limits: Mapping[Quota, int], *, max_clients: int = 100_000, clock: Clock = time.monotonic
    ) -> None:
        if max_clients < 1:
            raise ValueError("max_clients must be at least 1")
        for quota, limit in limits.items():
            if limit < 1:
                raise ValueError(f"the {quota} limit must be at least 1 per minute")
        self.clock = clock
        self.max_clients = max_clients
        # Quota(name): limits given by name ({"general": 60}) count too; an unknown name is a ValueError.
        self._quotas = {Quota(quota): _Buckets(Quota(quota), limit) for quota, limit in limits.items()}
        self.rejections: Counter[Quota] = Counter()  # quota -> requests refused

    @property
    def limits(self) -> dict[Quota, int]:
        return {quota: b.limit for quota, b in self._quotas.items()}

    def take(self, client_key: str, quota: Quota) -> Decision:
        """Spend one token of ``client_key``'s bucket in ``quota`` (a :class:`Quota`).

        Refused requests spend nothing, so a client that keeps retrying too
        early is not punished beyond the limit itself."""
        state = self._quotas[quota]
        now = self.clock()
        buckets = state.times
        # Taken out and put back: the bucket moves to the most recently used end.
        full_at = buckets.pop(client_key, None)
        if full_at is None:
            if len(buckets) >= self.max_clients:
                buckets.popitem(last=False)  # least recently used
                state.evictions += 1
            full_at = now
        elif full_at < now:
            full_at = now
        interval = state.interval
        after = full_at + interval  # when the bucket would be full again if we take a token
        if after - now <= WINDOW + _EPSILON:
            buckets[client_key] = after
            remaining = int((WINDOW - (after - now)) / interval + _EPSILON)
            # after - now >= interval > 0: the reset is at least one second.
            decision = Decision(True, state.quota, state.limit, remaining, math.ceil(after - now - _EPSILON), 0)
        else:
            buckets[client_key] = full_at
            self.rejections[state.quota] += 1
            wait = after - WINDOW - now  # until the bucket holds one whole token
            decision = Decision(False, state.quota, state.limit, 0, _ceil(full_at - now), max(1, _ceil(wait)))
        self._sweep(buckets, now)
        return decision

    def decision(self, quota: Quota, allowed: bool, seconds: float) -> Decision:
        """The decision of a bucket kept elsewhere (:class:`ipintel.infra.shared.SharedRateLimiter`), by the
        arithmetic of :meth:`take`: ``seconds`` is, when ``allowed``, the time until the bucket is full again
        after this request; when refused, the time until it is full."""
        state = self._quotas[quota]
        if allowed:
            remaining = int((WINDOW - seconds) / state.interval + _EPSILON)
            return Decision(True, state.quota, state.limit, max(0, remaining), max(1, _ceil(seconds)), 0)
        wait = seconds + state.interval - WINDOW
        return Decision(False, state.quota, state.limit, 0, _ceil(seconds), max(1, _ceil(wait)))

    def _sweep(self, buckets: OrderedDict[str, float], now: float) -> None:
        """Drop a few least-recently-used buckets that have refilled: a full bucket
        is the same as none. Every bucket idle for a whole window is full, so all
        of them go within a window of steady traffic."""
        for _ in range(_SWEEP_PER_TAKE):
            if not buckets:
                return
            key, full_at = next(iter(buckets.items()))
            if full_at > now:
                return
            del buckets[key]

    def sweep(self) -> int:
        """Drop every bucket that has refilled; returns how many. Not needed for
        correctness (``take`` sweeps as it goes); useful for a periodic task."""
        now = self.clock()
        dropped = 0
        for state in self._quotas.values():
            full = [key for key, full_at in state.times.items() if full_at <= now]
            for key in full:
                del state.times[key]
            dropped += len(full)
        return dropped

    def tracked(self, quota: Quota | None = None) -> int:
        """Clients with a bucket in ``quota`` (or in all quotas)."""
        if quota is not None:
            return len(self._quotas[quota].times)
        return sum(len(b.times) for b in self._quotas.values())

    def stats(self) -> dict[Quota, dict[str, int]]:
        """Per quota: ``limit``, ``rejections``, ``tracked`` clients, ``evictions`` (for /metrics)."""
        return {
            quota: {
                "limit": b.limit,
                "rejections": self.rejections[quota],
                "tracked": len(b.times),
                "evictions": b.evictions,
            }
            for quota, b in self._quotas.items()
        }


def limiter_from_settings(
    limits: Mapping[Quota, int] | None, max_clients: int, clock: Clock = time.monotonic
) -> RateLimiter | None:
    """The limiter for ``settings.rate_limits`` (``None``: limits are off)."""
    if not limits:
        return None
    return RateLimiter(limits, max_clients=max_clients, clock=clock)


# Spends one token of a quota for one caller; raises ``ApiError("rate_limited")`` when there is none.
# Awaited: with IPINTEL_REDIS_URL the bucket is in Redis (ipintel/infra/shared.py).
Spend = Callable[[Quota], Awaitable[None]]


async def spend_nothing(quota: Quota) -> None:
    """The :data:`Spend` while rate limits are off, and for callers that are not limited."""
