"""Rate limits (docs/API.md#rate-limits): a token bucket per client and scope, as pure-ASGI middleware.

Scopes and their default limits per minute: ``general`` 60 (``/ip``,
``/ip/...``, ``/cidr``, ``/mcp``), ``dns`` 30 (``/dns/...``), ``registry`` 10
(``/whois/...``, ``/blacklist/...``). A bucket holds ``limit`` tokens and
refills evenly over the minute, so a client may burst up to the limit and then
continues at ``limit`` requests per minute.

The client is the caller's address (docs/API.md#client-address, :func:`ipintel.web.client.client_address`):
an IPv4 address, or the /64 of an IPv6 address, because one IPv6 subscriber
usually holds a whole /64 and could otherwise rotate through 2^64 keys.

Each bucket is stored as one float, the time at which it will be full again
(the "theoretical arrival time" of GCRA, which is the same algorithm as a token
bucket stated with less state). A bucket whose time has passed is full, i.e.
identical to no bucket, so it can be dropped: idle clients are swept out as
new requests arrive, and a cap on tracked clients per scope evicts the least
recently used, so a flood of distinct addresses cannot exhaust memory.

Pure ASGI rather than ``BaseHTTPMiddleware``: no extra task or stream per
request on the hot path.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ipintel.addresses import IPAddress
from ipintel.web.client import Caller, Network, client_address
from ipintel.web.routing import first_segment, path_pattern

Clock = Callable[[], float]

WINDOW = 60.0  # seconds: the limits are per minute
_EPSILON = 1e-9  # float slack, so that exactly-on-time requests are not refused
_SWEEP_PER_TAKE = 4  # idle buckets examined per request: O(1) work, steady cleanup
_V6_PREFIX_MASK = ((1 << 64) - 1) << 64
_PEER_MEMO = 4096  # socket peers whose parsed address is remembered
_PATH_MEMO = 4096  # request paths whose scope is remembered
_PATH_MEMO_LENGTH = 256  # longer paths are matched every time, not remembered
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
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return f"{ipaddress.IPv6Address(int(ip) & _V6_PREFIX_MASK)}/64"


class Decision:
    """The outcome of spending one token: whether it was allowed, and the
    figures the ``RateLimit-*`` headers report."""

    __slots__ = ("allowed", "limit", "remaining", "reset", "retry_after", "scope")

    def __init__(self, allowed: bool, scope: str, limit: int, remaining: int, reset: int, retry_after: int) -> None:
        self.allowed = allowed
        self.scope = scope
        self.limit = limit  # tokens the bucket holds when full
        self.remaining = remaining  # whole tokens left after this request
        self.reset = reset  # seconds until the bucket is full again (0: it is full)
        self.retry_after = retry_after  # seconds until a request would be allowed (0 when allowed)

    @property
    def policy(self) -> str:
        return f"{self.limit};w={int(WINDOW)}"

    def headers(self) -> dict[str, str]:
        """``RateLimit-*`` headers, plus ``Retry-After`` when refused."""
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset),
            "RateLimit-Policy": self.policy,
        }
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after)
        return headers

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The same headers for an ASGI message (the middleware's hot path: built directly)."""
        constant = _CONSTANT_HEADERS.get(self.limit)
        if constant is None:
            constant = _CONSTANT_HEADERS[self.limit] = (
                (b"ratelimit-limit", b"%d" % self.limit),
                (b"ratelimit-policy", b"%d;w=%d" % (self.limit, WINDOW)),
            )
        headers = [
            constant[0],
            (b"ratelimit-remaining", b"%d" % self.remaining),
            (b"ratelimit-reset", b"%d" % self.reset),
            constant[1],
        ]
        if not self.allowed:
            headers.append((b"retry-after", b"%d" % self.retry_after))
        return headers

    def __repr__(self) -> str:
        return (
            f"Decision(allowed={self.allowed}, scope={self.scope!r}, limit={self.limit}, "
            f"remaining={self.remaining}, reset={self.reset}, retry_after={self.retry_after})"
        )


# limit -> its RateLimit-Limit and RateLimit-Policy headers, which never change
# (a handful of entries: one per configured limit).
_CONSTANT_HEADERS: dict[int, tuple[tuple[bytes, bytes], tuple[bytes, bytes]]] = {}


def _ceil(seconds: float) -> int:
    return max(0, math.ceil(seconds - _EPSILON))


class _Scope:
    """The buckets of one scope: client key -> time the bucket is full again, in LRU order."""

    __slots__ = ("buckets", "evictions", "interval", "limit", "name")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.interval = WINDOW / limit  # seconds to earn one token
        self.buckets: OrderedDict[str, float] = OrderedDict()
        self.evictions = 0


class RateLimiter:
    """Token buckets per (scope, client). ``take`` spends one token.

    ``clock`` is injectable (monotonic seconds) so tests can move time
    instead of sleeping."""

    def __init__(self, limits: Mapping[str, int], *, max_clients: int = 100_000, clock: Clock = time.monotonic) -> None:
        if max_clients < 1:
            raise ValueError("max_clients must be at least 1")
        for scope, limit in limits.items():
            if limit < 1:
                raise ValueError(f"the {scope} limit must be at least 1 per minute")
        self.clock = clock
        self.max_clients = max_clients
        self._scopes = {name: _Scope(name, limit) for name, limit in limits.items()}
        self.rejections: Counter[str] = Counter()  # scope -> requests refused

    @property
    def limits(self) -> dict[str, int]:
        return {name: s.limit for name, s in self._scopes.items()}

    def take(self, client_key: str, scope: str) -> Decision:
        """Spend one token of ``client_key``'s bucket in ``scope`` (``general``, ``dns``, ``registry``).

        Refused requests spend nothing, so a client that keeps retrying too
        early is not punished beyond the limit itself."""
        state = self._scopes[scope]
        now = self.clock()
        buckets = state.buckets
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
            decision = Decision(True, scope, state.limit, remaining, math.ceil(after - now - _EPSILON), 0)
        else:
            buckets[client_key] = full_at
            self.rejections[scope] += 1
            wait = after - WINDOW - now  # until the bucket holds one whole token
            decision = Decision(False, scope, state.limit, 0, _ceil(full_at - now), max(1, _ceil(wait)))
        self._sweep(buckets, now)
        return decision

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
        for state in self._scopes.values():
            full = [key for key, full_at in state.buckets.items() if full_at <= now]
            for key in full:
                del state.buckets[key]
            dropped += len(full)
        return dropped

    def tracked(self, scope: str | None = None) -> int:
        """Clients with a bucket in ``scope`` (or in all scopes)."""
        if scope is not None:
            return len(self._scopes[scope].buckets)
        return sum(len(s.buckets) for s in self._scopes.values())

    def stats(self) -> dict[str, dict[str, int]]:
        """Per scope: ``limit``, ``rejections``, ``tracked`` clients, ``evictions`` (for /metrics)."""
        return {
            name: {
                "limit": s.limit,
                "rejections": self.rejections[name],
                "tracked": len(s.buckets),
                "evictions": s.evictions,
            }
            for name, s in self._scopes.items()
        }


# The middleware ----------------------------------------------------------------------

# Paths that are always limited in the general scope even without a matching
# route yet: the MCP endpoint answers on both spellings, without a redirect (docs/MCP.md).
MCP_RULES: tuple[tuple[str, str], ...] = (("/mcp", "general"), ("/mcp/", "general"))


class _Rules:
    """Which scope a path belongs to, from Starlette route patterns.

    Matching the route patterns (rather than prefixes) keeps unknown routes
    unlimited (docs/API.md#rate-limits). Patterns are grouped by their first
    path segment so a request is compared against two or three regexes."""

    def __init__(self, rules: Iterable[tuple[str, str | None]]) -> None:
        self._by_segment: dict[str, list[tuple[re.Pattern[str], str]]] = {}
        for path, scope in rules:
            if scope is None:
                continue
            regex = path_pattern(path)  # as the router matches it: no match before a final newline
            self._by_segment.setdefault(first_segment(path), []).append((regex, scope))
        # Recent paths and their scope (bounded: emptied when full): clients repeat paths.
        self._known: dict[str, str | None] = {}

    def scope_of(self, path: str) -> str | None:
        try:
            return self._known[path]
        except KeyError:
            pass
        scope = self._match(path)
        if len(path) <= _PATH_MEMO_LENGTH:
            if len(self._known) >= _PATH_MEMO:
                self._known.clear()
            self._known[path] = scope
        return scope

    def _match(self, path: str) -> str | None:
        candidates = self._by_segment.get(first_segment(path))
        if candidates:
            for regex, scope in candidates:
                if regex.match(path):
                    return scope
        return None


class RateLimitGate:
    """What rate limiting decides for one request, without the ASGI plumbing:
    resolves the caller's address (docs/API.md#client-address), stores it in
    ``scope["state"]["caller"]`` (:class:`~ipintel.web.client.Caller`), and spends a token of the route's scope.

    :class:`~ipintel.web.middleware.RequestContextMiddleware` calls it inline,
    so that a request passes through one middleware and one ``send`` wrapper,
    not two; :class:`RateLimitMiddleware` wraps it as middleware of its own.
    With ``limiter=None`` (limits off) only the address is resolved."""

    def __init__(
        self,
        *,
        limiter: RateLimiter | None,
        rules: Iterable[tuple[str, str | None]],
        trusted_proxies: Sequence[Network] = (),
    ) -> None:
        self.limiter = limiter
        self.rules = _Rules(rules)
        self.trusted_proxies = tuple(trusted_proxies)
        # Without trusted proxies the caller is a function of the socket peer
        # alone: remember the parsed answer for recent peers (bounded: emptied when full).
        self._peers: dict[str | None, Caller] = {}

    def _caller(self, scope: Scope) -> Caller:
        """The caller's canonical address (docs/API.md#client-address) and its rate-limit key."""
        client = scope.get("client")
        peer = client[0] if client else None
        if not self.trusted_proxies:
            known = self._peers.get(peer)
            if known is not None:
                return known
        ip = client_address(peer, Headers(scope=scope), self.trusted_proxies)
        caller = Caller(str(ip) if ip is not None else None, client_key(ip))
        if not self.trusted_proxies:
            if len(self._peers) >= _PEER_MEMO:
                self._peers.clear()
            self._peers[peer] = caller
        return caller

    def admit(self, scope: Scope) -> Decision | None:
        """Spend the request's token: the decision, or ``None`` when the request is not limited."""
        caller = self._caller(scope)
        scope.setdefault("state", {})["caller"] = caller
        limiter = self.limiter
        if limiter is None or scope["method"] == "OPTIONS":
            # CORS preflights are free: a browser sends one before real requests.
            return None
        route_scope = self.rules.scope_of(scope["path"])
        if route_scope is None:
            return None
        return limiter.take(caller.key, route_scope)


class RateLimitMiddleware:
    """:class:`RateLimitGate` as pure-ASGI middleware.

    Every limited response gets the ``RateLimit-*`` headers; a refused one is
    a 429 ``rate_limited`` with ``Retry-After`` (a JSON-RPC error on ``/mcp``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limiter: RateLimiter | None,
        rules: Iterable[tuple[str, str | None]],
        trusted_proxies: Sequence[Network] = (),
    ) -> None:
        self.app = app
        self.gate = RateLimitGate(limiter=limiter, rules=rules, trusted_proxies=trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision = self.gate.admit(scope)
        if decision is None:
            await self.app(scope, receive, send)
            return
        extra = decision.raw_headers()
        if not decision.allowed:
            await refuse(send, scope["path"], decision, extra)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def refuse(send: Send, path: str, decision: Decision, extra: list[tuple[bytes, bytes]]) -> None:
    """Answer a refused request: 429 ``rate_limited`` with ``extra`` (its ``RateLimit-*`` headers)."""
    message = (
        f"rate limit of {decision.limit} requests per minute for {decision.scope} routes exceeded; "
        f"retry in {decision.retry_after} s"
    )
    if path == "/mcp" or path.startswith("/mcp/"):
        # /mcp always answers JSON-RPC (docs/MCP.md); the request was not read, so its id is unknown.
        payload: dict[str, object] = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32000, "message": message, "data": {"code": "rate_limited"}},
        }
    else:
        payload = {"error": {"code": "rate_limited", "message": message}}
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def limiter_from_settings(
    limits: Mapping[str, int] | None, max_clients: int, clock: Clock = time.monotonic
) -> RateLimiter | None:
    """The limiter for ``settings.rate_limits`` (``None``: limits are off)."""
    if not limits:
        return None
    return RateLimiter(limits, max_clients=max_clients, clock=clock)
