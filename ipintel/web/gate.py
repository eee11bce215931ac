"""The rate-limit gate of a request (docs/API.md#rate-limits): who is asking, which quota the path
spends, and the 429 when it is spent. The buckets themselves are :mod:`ipintel.infra.limiter`.

:class:`~ipintel.web.middleware.RequestContextMiddleware` calls the gate
inline, so that a request passes through one middleware and one ``send``
wrapper: on a cached answer each layer is a measurable share of the time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.types import Scope

from ipintel.errors import ApiError
from ipintel.infra.limiter import WINDOW, Decision, Quota, RateLimiter, Spend, client_key, spend_nothing
from ipintel.infra.memo import BoundedMemo
from ipintel.infra.shared import SharedRateLimiter
from ipintel.web.client import Caller, Network, client_address
from ipintel.web.routing import first_segment, path_pattern

if TYPE_CHECKING:
    from ipintel.web.api_keys import ApiKeys

_PEER_MEMO = 4096  # socket peers whose caller is remembered
_PATH_MEMO = 4096  # request paths whose quota is remembered
_PATH_MEMO_LENGTH = 256  # longer paths are matched every time, not remembered

# A route pattern and the quota its requests spend (None: not limited).
Rule = tuple[str, Quota | None]

# Paths that are always limited in the general quota even without a matching
# route yet: the MCP endpoint answers on both spellings, without a redirect (docs/MCP.md).
MCP_RULES: tuple[Rule, ...] = (("/mcp", Quota.GENERAL), ("/mcp/", Quota.GENERAL))


class PathQuotas:
    """Which quota a path spends, from Starlette route patterns.

    Matching the route patterns (rather than prefixes) keeps unknown routes
    unlimited (docs/API.md#rate-limits). Patterns are grouped by their first
    path segment so a request is compared against two or three regexes."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self._by_segment: dict[str, list[tuple[re.Pattern[str], Quota]]] = {}
        for path, quota in rules:
            if quota is None:
                continue
            regex = path_pattern(path)  # as the router matches it: no match before a final newline
            self._by_segment.setdefault(first_segment(path), []).append((regex, quota))
        # Recent paths and their quota: clients repeat paths.
        self._known: BoundedMemo[str, Quota | None] = BoundedMemo(_PATH_MEMO)

    def quota_of(self, path: str) -> Quota | None:
        try:
            return self._known[path]
        except KeyError:
            pass
        quota = self._match(path)
        if len(path) <= _PATH_MEMO_LENGTH:
            self._known[path] = quota
        return quota

    def _match(self, path: str) -> Quota | None:
        candidates = self._by_segment.get(first_segment(path))
        if candidates:
            for regex, quota in candidates:
                if regex.match(path):
                    return quota
        return None


class RateLimitGate:
    """What rate limiting decides for one request, without the ASGI plumbing:
    resolves the caller's address (docs/API.md#client-address), stores it in
    ``scope["state"]["caller"]`` (:class:`~ipintel.web.client.Caller`), and
    spends a token of the path's quota. With ``limiter=None`` (limits off)
    only the caller is resolved.

    ``shared``: the buckets in Redis (``IPINTEL_REDIS_URL``). The middleware then awaits
    :meth:`admit_shared`; without it, :meth:`admit` decides synchronously, as fast as ever.

    ``keys``: the API keys (``IPINTEL_API_KEYS_FILE``, docs/API.md#authentication), checked before a token
    is spent: a request without a valid key raises :class:`~ipintel.web.api_keys.Unauthorized`, which the
    middleware answers 401; an accepted one spends from its key's buckets (``key:<name>``)."""

    def __init__(
        self,
        *,
        limiter: RateLimiter | None,
        rules: Iterable[Rule],
        trusted_proxies: Sequence[Network] = (),
        shared: SharedRateLimiter | None = None,
        keys: ApiKeys | None = None,
    ) -> None:
        self.limiter = limiter
        self.keys = keys
        self.shared = shared if limiter is not None else None
        self.rules = PathQuotas(rules)
        self.trusted_proxies = tuple(trusted_proxies)
        # Without trusted proxies the caller is a function of the socket peer
        # alone: remember it for recent peers.
        self._peers: BoundedMemo[str | None, Caller] = BoundedMemo(_PEER_MEMO)

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
            self._peers[peer] = caller
        return caller

    def _limited(self, scope: Scope) -> tuple[Caller, Quota | None]:
        """The request's caller (authenticated when keys are on, before any token is spent:
        docs/API.md#authentication) and the quota it spends (``None``: not limited)."""
        caller = self._caller(scope)
        scope.setdefault("state", {})["caller"] = caller
        if self.keys is not None:
            caller = scope["state"]["caller"] = self.keys.authenticate(scope, caller)
        if scope["method"] == "OPTIONS":  # CORS preflights are free: a browser sends one before real requests
            return caller, None
        return caller, self.rules.quota_of(scope["path"])

    def admit(self, scope: Scope) -> Decision | None:
        """Spend the request's token: the decision, or ``None`` when the request is not limited.

        A request refused 401 spends a ``general`` token of its address (issue 23, point 5): guessing keys is
        limited like any request, and once the address's bucket is empty the answer is 429, not 401."""
        try:
            caller, quota = self._limited(scope)
        except ApiError as refusal:  # Unauthorized (web.api_keys imports this module)
            if refusal.code != "unauthorized" or self.limiter is None:
                raise
            decision = self.limiter.take(scope["state"]["caller"].key, Quota.GENERAL)
            if decision.allowed:
                raise
            return decision
        limiter = self.limiter if caller.limits is None else caller.limits.local  # a key's own limits
        if limiter is None or quota is None:
            return None
        return limiter.take(caller.key, quota)

    async def admit_shared(self, scope: Scope) -> Decision | None:
        """:meth:`admit` with the bucket in Redis (one round trip; the in-process bucket when Redis is not
        available)."""
        try:
            caller, quota = self._limited(scope)
        except ApiError as refusal:
            if refusal.code != "unauthorized" or self.shared is None:
                raise
            decision = await self.shared.take(scope["state"]["caller"].key, Quota.GENERAL)
            if decision.allowed:
                raise
            return decision
        shared = self.shared if caller.limits is None else caller.limits.shared  # a key's own limits
        if shared is None or quota is None:
            return None
        return await shared.take(caller.key, quota)


def rate_limit_headers(decision: Decision) -> list[tuple[bytes, bytes]]:
    """The ``RateLimit-*`` headers of a limited answer, plus ``Retry-After`` when refused (ASGI form:
    every limited request sends them)."""
    constant = _CONSTANT_HEADERS.get(decision.limit)
    if constant is None:
        constant = _CONSTANT_HEADERS[decision.limit] = (
            (b"ratelimit-limit", b"%d" % decision.limit),
            (b"ratelimit-policy", b"%d;w=%d" % (decision.limit, WINDOW)),
        )
    headers = [
        constant[0],
        (b"ratelimit-remaining", b"%d" % decision.remaining),
        (b"ratelimit-reset", b"%d" % decision.reset),
        constant[1],
    ]
    if not decision.allowed:
        headers.append((b"retry-after", b"%d" % decision.retry_after))
    return headers


# limit -> its RateLimit-Limit and RateLimit-Policy headers, which never change
# (a handful of entries: one per configured limit).
_CONSTANT_HEADERS: dict[int, tuple[tuple[bytes, bytes], tuple[bytes, bytes]]] = {}


def rate_limited(decision: Decision) -> ApiError:
    """The 429 ``rate_limited`` of a refused request; the middleware adds the ``RateLimit-*`` headers."""
    return ApiError(
        "rate_limited",
        f"rate limit of {decision.limit} requests per minute for {decision.quota} routes exceeded; "
        f"retry in {decision.retry_after} s",
    )


def quota_spender(limiter: RateLimiter | SharedRateLimiter | None, key: str) -> Spend:
    """Spends one token of a quota for the caller ``key``, beyond the request's own token
    (docs/API.md#rate-limits): an MCP ``tools/call`` spends its tool's quota, a profile or a batch one
    token per address and part that asks an upstream. A spent quota raises ``rate_limited``, which
    the caller answers in that tool's or part's place. ``limiter`` is ``None`` when limits are off,
    a :class:`SharedRateLimiter` when the buckets are in Redis (``app.state.limiter`` either way)."""
    if limiter is None:
        return spend_nothing

    if isinstance(limiter, SharedRateLimiter):
        shared = limiter

        async def spend(quota: Quota) -> None:
            _spent(await shared.take(key, quota), quota)

        return spend

    local = limiter

    async def spend_locally(quota: Quota) -> None:
        _spent(local.take(key, quota), quota)

    return spend_locally


def _spent(decision: Decision, quota: Quota) -> None:
    if not decision.allowed:
        wait = max(1, math.ceil(decision.retry_after or 1))
        raise ApiError(
            "rate_limited",
            f"the {quota} rate limit is spent; call again in {wait} s",
            headers={"Retry-After": str(wait)},
        )
