"""Optional shared state on Redis or Valkey (``IPINTEL_REDIS_URL``; docs/API.md#shared-state): the rate-limit
buckets (:class:`SharedRateLimiter`) and the caches of upstream answers (behind
:class:`~ipintel.infra.cache.Cache`) shared by several processes (``IPINTEL_WORKERS``, replicas). Without the
setting nothing here runs. GeoIP and VPN verdicts are local lookups and stay in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ipintel.infra.limiter import WINDOW, Decision, Quota, RateLimiter

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

log = logging.getLogger("ipintel.shared")

T = TypeVar("T")

# Keys are ipintel:v1:<kind>:...; values JSON (cache entries) or plain numbers (buckets), each written with an
# expiry: Redis needs no persistence and no cleanup, and losing it empties the caches and refills every bucket,
# which is safe.
PREFIX = "ipintel:v1:"
DEFAULT_TIMEOUT = 0.05  # seconds: IPINTEL_REDIS_TIMEOUT
BACKOFF = 2.0  # seconds between pings of a Redis that failed; requests do not ask it meanwhile

# The GCRA update of RateLimiter.take, in microseconds of the server's clock (TIME inside the script: no pod's
# clock matters), atomically, in one round trip (EVALSHA), so that a client's limit holds across every process. The key holds the time at which
# the bucket is full again; a bucket that is full is no key (it expires then). Refused requests write nothing.
# Returns {allowed, seconds}: for an allowed request the time until the bucket is full again after it, for a
# refused one the time until it is full. Floats go back as text: Lua numbers become integer replies.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local full_at = tonumber(redis.call('GET', KEYS[1])) or now
if full_at < now then full_at = now end
local after = full_at + interval
if after - now <= window + 0.001 then
  redis.call('SET', KEYS[1], string.format('%.17g', after), 'PX', math.max(1, math.ceil((after - now) / 1000)))
  return {1, string.format('%.17g', (after - now) / 1000000)}
end
return {0, string.format('%.17g', (full_at - now) / 1000000)}
"""


# A deadline that fires this much later than asked means the event loop was busy (another request's CPU work),
# not that Redis was slow: the answer may be waiting in the socket, unread. The operation then gets its timeout
# again, from the moment the loop is free, at most _MAX_EXTENSIONS times.
_LATE = 0.010
_MAX_EXTENSIONS = 20


class _LagAwareDeadline:
    """``IPINTEL_REDIS_TIMEOUT`` measured in time the event loop could have read Redis's answer (issue 23).

    asyncio's timeout counts every millisecond, including those the loop spent on CPU-bound work elsewhere:
    a loop busy for 80 ms with Redis answering in 1 ms made the store "down" and the rate limits fall back to
    each process's own buckets, exactly when the service is loaded. Here the deadline is a callback: when it
    runs on time, the operation has had its timeout and is cancelled (``TimeoutError``, as before); when it
    runs late, the loop was busy, and the answer that arrived meanwhile is read in the loop's next turn, so the
    deadline moves to a whole timeout from now. A Redis that is really down or frozen still fails within
    about one timeout of loop time."""

    __slots__ = ("_cm", "_handle", "_left", "_loop", "_timeout")

    def __init__(self, cm: asyncio.Timeout, timeout: float) -> None:
        self._cm = cm
        self._timeout = timeout
        self._left = _MAX_EXTENSIONS
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_at(self._loop.time() + timeout, self._expire, self._loop.time() + timeout)

    def _expire(self, due: float) -> None:
        now = self._loop.time()
        if now - due > _LATE and self._left > 0:
            self._left -= 1
            self._handle = self._loop.call_at(now + self._timeout, self._expire, now + self._timeout)
            return
        self._cm.reschedule(now)  # expires at once: the operation is cancelled and raises TimeoutError

    def cancel(self) -> None:
        self._handle.cancel()


class SharedUnavailable(Exception):
    """Redis did not answer in time, failed, or is in its back-off: use the in-process state."""


class SharedStore:
    """The connection to Redis, its timeout and back-off, and the operations the service needs.

    Redis must never be the reason a request fails or waits long: every operation has a short timeout
    (``IPINTEL_REDIS_TIMEOUT``), and after a failure the store is degraded (:meth:`_failed`) until it answers
    again. ``/readyz`` reports the state (:meth:`health`), ``/metrics`` its counters."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: float = BACKOFF,
        namespace: str = "",
        password: str | None = None,
    ) -> None:
        self.url = url
        self._password = password  # IPINTEL_REDIS_PASSWORD_FILE's: never in the URL, never logged
        # Every key of this deployment starts with it (IPINTEL_REDIS_NAMESPACE): two deployments on one Redis
        # database share nothing unless they share a namespace.
        self.prefix = f"{PREFIX}{namespace}:" if namespace else PREFIX
        self.timeout = timeout
        self.backoff = backoff
        self._client: Redis | None = None
        self._take: AsyncScript | None = None
        self._healthy = True  # until an operation fails; then _recovery pings until it answers
        self._recovery: asyncio.Task[None] | None = None
        self.last_error: str | None = None
        self.operations: Counter[str] = Counter()  # operation -> attempts
        self.failures: Counter[tuple[str, str]] = Counter()  # (operation, "timeout" | "error") -> count
        self.bypassed: Counter[str] = Counter()  # operation -> not attempted (back-off)

    # Lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Connect (lazily: the pool opens connections as operations need them) and ping once; a Redis that
        is down at start is only reported (degraded), never fatal."""
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # The client's own timeouts are a backstop only: they are measured on the event loop, which a busy
        # process delays; the timeout that decides is :class:`_LagAwareDeadline`'s.
        backstop = max(1.0, _MAX_EXTENSIONS * self.timeout)
        self._client = Redis.from_url(
            self.url,
            socket_timeout=backstop,
            socket_connect_timeout=backstop,
            # No retries inside the client: a failed operation falls back at once, and the back-off decides
            # when Redis is asked again.
            retry=Retry(NoBackoff(), 0),
            client_name="ipintel",
        )
        if self._password is not None:  # after from_url: a password in the URL is overridden by the file's
            self._client.connection_pool.connection_kwargs["password"] = self._password
        self._take = self._client.register_script(_TAKE)
        try:
            await self.ping()
        except SharedUnavailable:
            log.warning(
                "Redis at %s is unavailable at start (%s): using in-process state", self.safe_url, self.last_error
            )

    async def close(self) -> None:
        if self._recovery is not None:
            self._recovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._recovery
            self._recovery = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def safe_url(self) -> str:
        """The URL without its password (in the user information or the query), for logs."""
        return redacted_url(self.url)

    # State -------------------------------------------------------------------

    @property
    def up(self) -> bool:
        """Whether the last operation succeeded (or none has failed yet)."""
        return self._healthy

    def health(self) -> dict[str, Any]:
        """The ``redis`` check of /readyz: ``ok``, or ``degraded`` with the last error (the service answers
        either way, from in-process state while degraded)."""
        if self._healthy:
            return {"status": "ok"}
        return {"status": "degraded", "error": self.last_error or "unavailable"}

    def stats(self) -> dict[str, Any]:
        return {
            "up": 1 if self._healthy else 0,
            "operations": dict(self.operations),
            "failures": dict(self.failures),
            "bypassed": dict(self.bypassed),
        }

    async def _run(self, operation: str, call: Callable[[Redis], Awaitable[T]], *, probe: bool = False) -> T:
        client = self._client
        if client is None or not (self._healthy or probe):
            self.bypassed[operation] += 1
            raise SharedUnavailable(operation)
        self.operations[operation] += 1
        try:
            async with asyncio.timeout(None) as deadline:
                watch = _LagAwareDeadline(deadline, self.timeout)
                try:
                    result = await call(client)
                finally:
                    watch.cancel()
        except TimeoutError as exc:
            self._failed(operation, "timeout", f"no answer within {self.timeout:g} s")
            raise SharedUnavailable(operation) from exc
        except Exception as exc:  # redis.RedisError, OSError: any failure falls back, none escapes
            self._failed(operation, "error", f"{type(exc).__name__}: {exc}"[:200])
            raise SharedUnavailable(operation) from exc
        if not self._healthy:
            log.warning("Redis at %s answers again: shared caches and rate limits in use", self.safe_url)
            self._healthy = True
        return result

    def _failed(self, operation: str, reason: str, message: str) -> None:
        # Degraded: no request asks Redis, a background task pings it every BACKOFF seconds. A dead or hung Redis
        # costs the requests in flight one timeout, not every request one each, and is used again within seconds
        # of its return; meanwhile limits are the in-process buckets (the full limit per process), caches local.
        self.failures[(operation, reason)] += 1
        self.last_error = message
        if self._healthy:
            log.warning(
                "Redis at %s failed (%s: %s): in-process caches and rate limits until it answers again",
                self.safe_url,
                operation,
                message,
            )
        self._healthy = False
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.get_running_loop().create_task(self._recover(), name="redis-recovery")

    async def _recover(self) -> None:
        """Ping a failed Redis every :attr:`backoff` seconds until it answers (then requests use it again)."""
        while not self._healthy and self._client is not None:
            await asyncio.sleep(self.backoff)
            with contextlib.suppress(SharedUnavailable):
                await self._run("ping", lambda client: client.ping(), probe=True)

    # Operations --------------------------------------------------------------

    async def ping(self) -> None:
        await self._run("ping", lambda client: client.ping(), probe=True)

    async def take(self, key: str, interval: float, window: float) -> tuple[bool, float]:
        """Spend one token of bucket ``key`` (interval and window in seconds): ``(allowed, seconds)``, as
        :data:`_TAKE` returns them."""
        script = self._take
        assert script is not None

        async def call(client: Redis) -> Any:
            return await script(keys=[key], args=[repr(interval * 1e6), repr(window * 1e6)], client=client)

        allowed, seconds = await self._run("rate_limit", call)
        return allowed == 1, float(seconds)

    async def get(self, key: str) -> tuple[bytes, float] | None:
        """The value of ``key`` and the seconds it has left, or ``None`` (missing, or without an expiry)."""

        async def call(client: Redis) -> Any:
            async with client.pipeline(transaction=False) as pipe:
                pipe.get(key)
                pipe.pttl(key)
                return await pipe.execute()

        value, pttl = await self._run("cache_get", call)
        if value is None or not isinstance(pttl, int) or pttl <= 0:
            return None
        return bytes(value), pttl / 1000.0

    async def set(self, key: str, value: bytes | str, seconds: float) -> None:
        milliseconds = max(1, math.ceil(seconds * 1000))
        await self._run("cache_set", lambda client: client.set(key, value, px=milliseconds))

    async def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        values = await self._run("cache_get", lambda client: client.mget(list(keys)))
        return [None if v is None else v if isinstance(v, bytes) else str(v).encode() for v in values]

    async def set_many(self, items: Sequence[tuple[str, bytes | str, float]]) -> None:
        """Several ``(key, value, seconds)`` in one round trip."""

        async def call(client: Redis) -> Any:
            async with client.pipeline(transaction=False) as pipe:
                for key, value, seconds in items:
                    pipe.set(key, value, px=max(1, math.ceil(seconds * 1000)))
                return await pipe.execute()

        await self._run("cache_set", call)


class SharedRateLimiter:
    """The rate limits of :class:`~ipintel.infra.limiter.RateLimiter`, with the buckets in Redis.

    ``take`` is asynchronous (one round trip); while Redis is unavailable it is the in-process limiter's
    ``take``, at the full limit per process. Refusals count in the in-process limiter's ``rejections``
    either way, so /metrics reads one set of figures."""

    def __init__(self, local: RateLimiter, store: SharedStore) -> None:
        self.local = local
        self.store = store
        self._intervals = {quota: WINDOW / limit for quota, limit in local.limits.items()}

    @property
    def limits(self) -> dict[Quota, int]:
        return self.local.limits

    async def take(self, client_key: str, quota: Quota) -> Decision:
        interval = self._intervals[quota]
        try:
            allowed, seconds = await self.store.take(f"{self.store.prefix}rl:{quota}:{client_key}", interval, WINDOW)
        except SharedUnavailable:
            return self.local.take(client_key, quota)
        decision = self.local.decision(quota, allowed, seconds)
        if not allowed:
            self.local.rejections[quota] += 1
        return decision

    def stats(self) -> dict[Quota, dict[str, int]]:
        return self.local.stats()


_SECRET_QUERY = re.compile(r"(?i)((?:^|[?&;])(?:password|username)=)[^&;#]*")


def redacted_url(url: str) -> str:
    """``url`` without its secrets, for logs and messages: the user information before ``@`` and the values
    of ``password=`` and ``username=`` query parameters are ``***`` (issue 23, point 6)."""
    scheme, sep, rest = url.partition("://")
    base, query_sep, query = rest.partition("?")
    if "@" in base:
        base = "***@" + base.rsplit("@", 1)[1]
    if query_sep:
        query = _SECRET_QUERY.sub(r"\1***", query)
    return scheme + sep + base + query_sep + query
