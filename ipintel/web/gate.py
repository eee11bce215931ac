"""The rate-limit gate of a request (docs/API.md#rate-limits): who is asking, which quota the path
spends, and the 429 when it is spent. The buckets themselves are :mod:`ipintel.infra.limiter`.

:class:`~ipintel.web.middleware.RequestContextMiddleware` calls the gate
inline, so that a request passes through one middleware and one ``send``
wrapper: on a cached answer each layer is a measurable share of the time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.types import Scope

from ipintel.errors import ApiError
from ipintel.infra.limiter import WINDOW, Decision, Quota, RateLimiter, client_key
from ipintel.infra.memo import BoundedMemo
from ipintel.infra.shared import SharedRateLimiter
from ipintel.web.client import Buckets, Caller, Network, client_address
from ipintel.web.routing import first_segment, path_pattern

if TYPE_CHECKING:
    from ipintel.web.api_keys import ApiKeys

_PEER_MEMO = 4096  # socket peers whose caller is remembered
_PATH_MEMO = 4096  # request paths whose quota is remembered
_PATH_MEMO_LENGTH = 256  # longer paths are matched every time, not remembered

# A route pattern and the quota its requests spend (None: not limited).
Rule = tuple[str, Quota | None]


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
    """Resolves each request's :class:`~ipintel.web.client.Caller` once, before routing: its address
    (docs/API.md#client-address), its API key when keys are on (docs/API.md#authentication), and the buckets its
    tokens come from; stores it in ``scope["state"]["caller"]`` and spends the token of the path's quota.
    Adapters spend further tokens with :meth:`Caller.spend <ipintel.web.client.Caller.spend>`.

    ``limiter=None``: limits are off, only the caller is resolved. ``shared``: the buckets in Redis
    (``IPINTEL_REDIS_URL``); the middleware then awaits :meth:`admit_shared`, else :meth:`admit` decides
    synchronously. ``keys``: a request to a limited path without a valid key raises
    :class:`~ipintel.web.credentials.Unauthorized` before any token of its own is spent."""

    def __init__(
        self,
        *,
        limiter: RateLimiter | None,
        rules: Iterable[Rule],
        trusted_proxies: Sequence[Network] = (),
        shared: SharedRateLimiter | None = None,
        keys: ApiKeys | None = None,
    ) -> None:
        self.keys = keys
        self.shared = shared if limiter is not None else None
        self.buckets = Buckets(limiter, self.shared) if limiter is not None else None  # the server's
        self.rules = PathQuotas(rules)  # compiled once: which paths are limited, and need a key
        self.trusted_proxies = tuple(trusted_proxies)
        # Without trusted proxies the caller is a function of the socket peer
        # alone: remember it for recent peers.
        self._peers: BoundedMemo[str | None, Caller] = BoundedMemo(_PEER_MEMO)

    def _caller(self, scope: Scope) -> Caller:
        """The caller's canonical address (docs/API.md#client-address), its rate-limit key and the server's
        buckets."""
        client = scope.get("client")
        peer = client[0] if client else None
        if not self.trusted_proxies:
            known = self._peers.get(peer)
            if known is not None:
                return known
        ip = client_address(peer, Headers(scope=scope), self.trusted_proxies)
        caller = Caller(str(ip) if ip is not None else None, client_key(ip), buckets=self.buckets)
        if not self.trusted_proxies:
            self._peers[peer] = caller
        return caller

    def _limited(self, scope: Scope) -> tuple[Caller, Quota | None]:
        """The request's caller (authenticated on a limited path when keys are on, before any token is spent)
        and the quota it spends (``None``: not limited)."""
        state = scope.setdefault("state", {})
        caller = state["caller"] = self._caller(scope)
        if scope["method"] == "OPTIONS":  # CORS preflights are free: a browser sends one before real requests
            return caller, None
        quota = self.rules.quota_of(scope["path"])
        if quota is not None and self.keys is not None:
            caller = state["caller"] = self.keys.authenticate(scope, caller)
        return caller, quota

    def _spending(self, scope: Scope) -> tuple[str, Quota, Buckets, ApiError | None] | None:
        """What the request spends: its bucket key, quota and buckets, and the 401 to raise once the token is
        spent (``None`` when the request is not limited).

        A request refused 401 spends a ``general`` token of its address (issue 23, point 5): guessing keys is
        limited like any request, and once the address's bucket is empty the answer is 429, not 401."""
        try:
            caller, quota = self._limited(scope)
        except ApiError as refusal:  # Unauthorized
            if refusal.code != "unauthorized" or self.buckets is None:
                raise
            return scope["state"]["caller"].key, Quota.GENERAL, self.buckets, refusal
        if caller.buckets is None or quota is None:
            return None
        return caller.key, quota, caller.buckets, None

    def admit(self, scope: Scope) -> Decision | None:
        """Spend the request's token in process: the decision, or ``None`` when the request is not limited."""
        spending = self._spending(scope)
        if spending is None:
            return None
        key, quota, buckets, refusal = spending
        return _settled(buckets.local.take(key, quota), refusal)

    async def admit_shared(self, scope: Scope) -> Decision | None:
        """:meth:`admit` with the buckets in Redis (one round trip; the in-process bucket when Redis is not
        available)."""
        spending = self._spending(scope)
        if spending is None:
            return None
        key, quota, buckets, refusal = spending
        return _settled(await buckets.take(key, quota), refusal)


def _settled(decision: Decision, refusal: ApiError | None) -> Decision:
    """The decision, unless the request was refused 401 and its address still had a token: then the 401."""
    if refusal is not None and decision.allowed:
        raise refusal
    return decision


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
