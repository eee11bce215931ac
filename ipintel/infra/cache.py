"""In-process TTL caches with per-entry lifetimes and single flight (docs/API.md#caching): one :class:`Cache`
per endpoint family (``geoip``, ``whois``, ``blacklist``, ``dns``), made by :func:`new_caches` and owned by
:class:`~ipintel.service.Intel`, so that the REST routes and the MCP tools share them; with
``IPINTEL_REDIS_URL``, the caches of upstream answers have Redis behind them (:mod:`ipintel.infra.shared`).
Cached values are shared between callers: treat them as read-only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, TypeVar

import orjson
from cachetools import TLRUCache

from ipintel.encoding import dumps
from ipintel.errors import ApiError
from ipintel.infra.shared import SharedStore, SharedUnavailable

log = logging.getLogger("ipintel.cache")

V = TypeVar("V")
Clock = Callable[[], float]
Lifetime = float | Callable[[Any], float | None] | None
ErrorLifetime = Callable[[ApiError], float | None] | None

# Lifetimes of docs/API.md#caching, in seconds.
MINUTE = 60.0
HOUR = 60 * MINUTE
DAY = 24 * HOUR
GEOIP_TTL = DAY  # /ip/:ip and /ip/:ip/vpn
WHOIS_TTL = 7 * DAY  # /whois/:ip
BLACKLIST_TTL = HOUR  # /blacklist/:ip, definitive verdicts only
DNS_MAX_TTL = 5 * MINUTE  # /dns/...: and never past the records' own TTL
NEGATIVE_TTL = 5 * MINUTE  # NXDOMAIN and RDAP 404, cached as errors
DNS_MAX_CACHED_BYTES = 4096  # larger DNS answers are not cached: entries x this bounds the DNS cache's memory
INCOMPLETE_TTL = 5 * MINUTE  # a VPN verdict made while a feed was missing or stale

# The caches Intel owns; the names are also the ``cache`` label in /metrics.
CACHE_NAMES = ("geoip", "whois", "blacklist", "dns")
# The caches of upstream answers, shared in Redis when IPINTEL_REDIS_URL is set; GeoIP and VPN verdicts are
# local lookups, cheaper than a round trip.
SHARED_CACHE_NAMES = ("whois", "blacklist", "dns")

# Errors that say "there is nothing there" rather than "something failed":
# asking again within minutes gives the same answer, so they are cached.
NEGATIVE_ERRORS = frozenset({"domain_not_found", "registration_not_found"})


class _Entry:
    """What a cache slot holds: a value, or an error to re-raise, and its expiry."""

    __slots__ = ("error", "expires", "value")

    def __init__(self, value: Any, error: ApiError | None, expires: float) -> None:
        self.value = value
        self.error = error
        self.expires = expires


def _expiry(key: Hashable, entry: _Entry, now: float) -> float:
    return entry.expires


class _CountingTLRU(TLRUCache[Hashable, _Entry]):
    """TLRUCache that counts the entries pushed out for room (not those that expired). Bounded in entries (least
    recently used evicted first), with a lifetime chosen per entry: the right one often depends on the answer (a
    DNS answer lives no longer than its records' TTL; a blacklist verdict with an unavailable source is not
    cached at all)."""

    def __init__(self, maxsize: int, timer: Clock) -> None:
        super().__init__(maxsize, _expiry, timer=timer)
        self.evictions = 0

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        self.evictions += 1
        return item


class Cache:
    """A bounded TTL cache with single flight: while a key is being loaded, further callers for the same key wait
    for that one load instead of starting their own, so a burst of identical requests costs one upstream call."""

    def __init__(
        self, name: str, *, max_entries: int, clock: Clock = time.monotonic, shared: SharedStore | None = None
    ) -> None:
        if max_entries < 1:
            raise ValueError("a cache needs room for at least one entry")
        self.name = name
        self.clock = clock
        # Redis behind the local entries: a local miss asks it (one round trip, within its short timeout) before
        # the upstream, and a load stores there too (_load). Single flight stays per process; Redis down or slow:
        # the local cache alone, as without it.
        self.shared = shared
        self.shared_hits = 0
        self._entries = _CountingTLRU(max_entries, clock)
        # At most one entry per key being loaded right now: bounded by the
        # number of requests in flight, and emptied as each load finishes.
        self._loading: dict[Hashable, asyncio.Task[Any]] = {}
        self.hits = 0
        self.misses = 0
        self.coalesced = 0

    async def get_or_load(
        self,
        key: Hashable,
        load: Callable[[], Awaitable[V]],
        *,
        ttl: Lifetime,
        error_ttl: ErrorLifetime = None,
    ) -> V:
        """The cached value for ``key``, or the result of ``load()``, stored for ``ttl``.

        ``ttl``: seconds, or a function of the result giving seconds, or
        ``None`` (or a result of ``None`` / ``<= 0``) not to store the
        result. ``error_ttl``: a function of an :class:`ApiError` raised by
        ``load`` giving how long to cache that error (``None``: do not). A
        cached error is raised again, as a fresh exception, on every hit.
        """
        try:
            entry: _Entry = self._entries[key]
        except KeyError:
            pass
        else:
            self.hits += 1
            if entry.error is not None:
                raise _fresh(entry.error)
            return entry.value  # type: ignore[no-any-return]

        task = self._loading.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.ensure_future(self._load(key, load, ttl, error_ttl))
            self._loading[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        else:
            self.coalesced += 1  # joins the load under way: no upstream call of its own
        # The load runs as its own task, shielded: a caller that gives up (client disconnect, timeout) must not
        # cancel the load the others wait for. A failure reaches every waiter and is not cached unless error_ttl
        # says so (NXDOMAIN, RDAP 404).
        return await asyncio.shield(task)

    def peek(self, key: Hashable) -> Callable[[], Any] | None:
        """Without awaiting: ``None`` when :meth:`get_or_load` would have to load ``key`` (or join a
        load), else a function answering as its hit does (counting the hit, giving the value or
        raising the cached error). A batch answers its cached addresses this way, without a task
        each; nothing is counted until the answer is taken."""
        try:
            entry: _Entry = self._entries[key]
        except KeyError:
            return None

        def take() -> Any:
            self.hits += 1
            if entry.error is not None:
                raise _fresh(entry.error)
            return entry.value

        return take

    def store(self, key: Hashable, value: Any, seconds: float | None) -> None:
        """Keep ``value`` for ``seconds`` (``None`` or ``<= 0``: not at all), in process only: what a local
        lookup computed in the caller's task, without :meth:`get_or_load`'s task and single flight (a
        synchronous computation has no flight to share)."""
        if seconds is not None and seconds > 0:
            self._store(key, _Entry(value, None, self.clock() + seconds))

    async def _load(
        self, key: Hashable, load: Callable[[], Awaitable[Any]], ttl: Lifetime, error_ttl: ErrorLifetime
    ) -> Any:
        if self.shared is not None:
            # A value or a negatively cached error found in Redis is kept locally for the lifetime it has left.
            entry = await self._shared_entry(key)
            if entry is not None:
                self.shared_hits += 1
                self._store(key, entry)
                if entry.error is not None:
                    raise _fresh(entry.error)
                return entry.value
        try:
            value = await load()
        except ApiError as error:
            seconds = error_ttl(error) if error_ttl is not None else None
            if seconds is not None and seconds > 0:
                self._store(key, _Entry(None, _fresh(error), self.clock() + seconds))
                await self._share(key, {"e": [error.code, error.message, dict(error.headers)]}, seconds)
            raise
        seconds = ttl(value) if callable(ttl) else ttl
        if seconds is not None and seconds > 0:  # locally and in Redis, for the same lifetime
            self._store(key, _Entry(value, None, self.clock() + seconds))
            await self._share(key, {"v": value}, seconds)
        return value

    def _shared_key(self, key: Hashable) -> str:
        text = ":".join(str(part) for part in key) if isinstance(key, tuple) else str(key)
        assert self.shared is not None
        return f"{self.shared.prefix}{self.name}:{text}"

    async def _shared_entry(self, key: Hashable) -> _Entry | None:
        """What Redis holds for ``key``, as a local entry expiring when Redis's does; ``None`` on a miss,
        or when Redis is unavailable or holds something unreadable (then the upstream is asked)."""
        assert self.shared is not None
        try:
            found = await self.shared.get(self._shared_key(key))
        except SharedUnavailable:
            return None
        if found is None:
            return None
        payload, seconds = found
        try:
            document = orjson.loads(payload)
            if "e" in document:
                code, message, headers = document["e"]
                return _Entry(None, ApiError(code, message, headers=headers), self.clock() + seconds)
            return _Entry(document["v"], None, self.clock() + seconds)
        except (ValueError, KeyError, TypeError):  # another version's format, or a foreign key
            log.warning("unreadable shared %s cache entry ignored", self.name)
            return None

    async def _share(self, key: Hashable, document: dict[str, Any], seconds: float) -> None:
        """Store an entry in Redis too, for its lifetime; a failure leaves it local only."""
        if self.shared is None:
            return
        try:
            payload = dumps(document)
        except (TypeError, ValueError):  # not JSON: kept in this process only
            log.warning("a %s cache entry is not JSON: not shared", self.name)
            return
        try:
            await self.shared.set(self._shared_key(key), payload, seconds)
        except SharedUnavailable:
            pass

    def _store(self, key: Hashable, entry: _Entry) -> None:
        self._entries[key] = entry

    def _finished(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        if self._loading.get(key) is task:
            del self._loading[key]
        # Mark the outcome as seen: when every waiter was cancelled nobody
        # else retrieves it, and asyncio would log "exception never retrieved".
        if not task.cancelled():
            task.exception()

    def clear(self) -> None:
        """Forget every entry (e.g. after a database reload); loads under way still finish."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    @property
    def evictions(self) -> int:
        return self._entries.evictions

    def stats(self) -> dict[str, int]:
        """Counters for /metrics: ``hits`` (answered from the cache), ``misses``
        (loads started), ``coalesced`` (callers that joined a load under way
        instead of starting one), ``evictions`` (entries pushed out for room),
        and the gauges ``entries``, ``max_entries``, ``loading``."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "coalesced": self.coalesced,
            "evictions": self.evictions,
            "entries": len(self._entries),
            "max_entries": int(self._entries.maxsize),
            "loading": len(self._loading),
            **({"shared_hits": self.shared_hits} if self.shared is not None else {}),
        }


def _fresh(error: ApiError) -> ApiError:
    """A new exception with the same code, message and headers: re-raising one
    stored instance would grow its traceback on every hit."""
    return ApiError(error.code, error.message, headers=dict(error.headers))


def new_caches(
    max_entries: int, *, clock: Clock = time.monotonic, shared: SharedStore | None = None
) -> dict[str, Cache]:
    """The caches :class:`~ipintel.service.Intel` owns, one per name in :data:`CACHE_NAMES`; those of
    :data:`SHARED_CACHE_NAMES` with ``shared`` (Redis) behind them."""
    return {
        name: Cache(name, max_entries=max_entries, clock=clock, shared=shared if name in SHARED_CACHE_NAMES else None)
        for name in CACHE_NAMES
    }


def stats(caches: Mapping[str, Cache]) -> dict[str, dict[str, int]]:
    """Every cache's counters by name, for /metrics."""
    return {name: cache.stats() for name, cache in caches.items()}


# Lifetime policies: how long one answer may be kept -------------------------


def negative_error_ttl(error: ApiError) -> float | None:
    """NXDOMAIN (``domain_not_found``) and RDAP 404 (``registration_not_found``)
    are cached 5 minutes; every other error not at all (docs/API.md#caching)."""
    return NEGATIVE_TTL if error.code in NEGATIVE_ERRORS else None


def dns_ttl(result: Mapping[str, Any]) -> float | None:
    """A DNS answer lives 5 minutes, never longer than its shortest record TTL; ``None`` (not kept) for a TTL
    of 0 or record data over :data:`DNS_MAX_CACHED_BYTES` (docs/API.md#caching)."""
    records = result.get("records") or []
    # Served but not kept: the cache is bounded in entries, and anyone can publish 64 KB of TXT records under
    # thousands of names.
    if sum(len(str(r.get("data", ""))) for r in records if isinstance(r, Mapping)) > DNS_MAX_CACHED_BYTES:
        return None
    ttls = [r["ttl"] for r in records if isinstance(r, Mapping) and isinstance(r.get("ttl"), int)]
    if not ttls:
        # An empty answer has no TTL of its own here (aiodns does not return the SOA minimum): kept 5 minutes like
        # NXDOMAIN, its sibling.
        return DNS_MAX_TTL if not records else None
    # A record with TTL 0 means "do not cache" (RFC 1035), so neither do we: 0 becomes None.
    return min(DNS_MAX_TTL, float(min(ttls))) or None


def blacklist_ttl(result: Mapping[str, Any]) -> float | None:
    """A blacklist verdict is kept 1 hour only when it is definitive: every
    source answered. With one source ``unavailable`` the next request should
    ask again rather than repeat "unknown" for an hour."""
    sources = result.get("sources")
    if not isinstance(sources, list):
        return None
    if any(not isinstance(s, Mapping) or s.get("status") == "unavailable" for s in sources):
        return None
    return BLACKLIST_TTL
