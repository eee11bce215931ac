"""The API keys in force (``IPINTEL_API_KEYS_FILE``, docs/API.md#authentication): the check of a request's key,
each key's buckets, and the file's reload while the service runs.

A request's key is hashed (SHA-256), looked up by its digest and compared in constant time; names are what logs
and metrics show, never a key or a digest. The file's format is :mod:`ipintel.web.key_file`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.types import Scope

from ipintel.infra.background import BackgroundTask, poll
from ipintel.infra.file_watch import FileStat, SettledFile, stat_of
from ipintel.infra.limiter import Clock, RateLimiter
from ipintel.infra.shared import SharedRateLimiter
from ipintel.web.client import Buckets, Caller
from ipintel.web.credentials import MAX_KEY_BYTES, MIN_KEY_BYTES, presented_key, refusal
from ipintel.web.key_file import KeyFileError, KeyLine, read_key_file

if TYPE_CHECKING:
    from ipintel.infra.shared import SharedStore
    from ipintel.settings import Settings

log = logging.getLogger("ipintel.api_keys")

BUCKET_PREFIX = "key:"  # the rate-limit key of an API key's requests: key:<name> (never an address)


def bucket_of(name: str) -> str:
    """The rate-limit key of the requests made with the key ``name``."""
    return BUCKET_PREFIX + name


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key in force."""

    name: str
    digest: bytes
    # Its own limits' buckets when its line gives limits that differ from the server's; None: the server's
    # (IPINTEL_RATE_LIMITS), or limits are off.
    buckets: Buckets | None


class ApiKeys:
    """The keys in force (``IPINTEL_API_KEYS_FILE``), the check of each request, and the file's reloads.

    The gate asks :meth:`authenticate` on the paths that are rate limited (every REST resource and ``/mcp``);
    the others (``/healthz``, ``/readyz``, ``/metrics``, ``/openapi.json``, ``/docs``, the page) stay open.
    ``limiter``: the server's rate limiter (``None``: limits are off, and a key's own limits do nothing);
    ``store``: Redis (``IPINTEL_REDIS_URL``), where the buckets of keys with limits of their own live too.

    Counters for /metrics: ``requests`` (key name -> requests accepted), ``refusals`` (``missing``,
    ``malformed``, ``invalid`` -> 401s), ``reloads`` (``ok``/``error`` -> loads of a new file)."""

    def __init__(
        self,
        path: Path,
        keys: Iterable[KeyLine],
        *,
        limiter: RateLimiter | None = None,
        store: SharedStore | None = None,
        clock: Clock | None = None,
        interval: float = 5.0,
    ) -> None:
        self.path = path
        self.interval = interval
        self.limiter = limiter
        self.store = store
        self.clock: Clock = clock or time.monotonic
        self._by_digest: dict[bytes, ApiKey] = {}
        self.requests: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()
        self.reloads: Counter[str] = Counter()
        self._on_disk = SettledFile(path, stat_of(path))  # the file in force, against what the polls see
        self._task = BackgroundTask("api-keys-watcher")
        self._lock = asyncio.Lock()
        self._install(list(keys))

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        limiter: RateLimiter | None,
        store: SharedStore | None,
        clock: Clock | None = None,
    ) -> ApiKeys | None:
        """The keys of ``settings.api_keys_file`` (``None`` when it is not set); a :class:`KeyFileError`
        (a :class:`~ipintel.settings.ConfigError`: exit 2) when the file cannot be used."""
        path = settings.api_keys_file
        if path is None:
            return None
        keys = read_key_file(path)
        if not keys:
            log.warning("the API key file %s holds no key: every API request will be refused (401)", path)
        return cls(
            path,
            keys,
            limiter=limiter,
            store=store if limiter is not None else None,
            clock=clock,
            interval=settings.db_check_interval,
        )

    # The check ------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return sorted(key.name for key in self._by_digest.values())

    def authenticate(self, scope: Scope, caller: Caller) -> Caller:
        """The request's caller as its key makes it (name, bucket ``key:<name>``, its own buckets or the
        server's); :class:`~ipintel.web.credentials.Unauthorized` without a valid key."""
        presented = presented_key(scope.get("headers", ()))
        if isinstance(presented, str):
            self.refusals[presented] += 1
            raise refusal(presented)
        key = None
        if len(presented) < MIN_KEY_BYTES:
            self.refusals["invalid"] += 1
            raise refusal("short")
        if len(presented) <= MAX_KEY_BYTES:
            digest = hashlib.sha256(presented).digest()
            # The index finds the candidate; the comparison that decides runs in constant time.
            key = self._by_digest.get(digest)
            if key is not None and not hmac.compare_digest(key.digest, digest):
                key = None
        if key is None:
            self.refusals["invalid"] += 1
            raise refusal("invalid")
        self.requests[key.name] += 1
        return Caller(caller.ip, bucket_of(key.name), key.name, key.buckets or caller.buckets)

    # Loading ----------------------------------------------------------------------------

    def _install(self, lines: list[KeyLine]) -> None:
        previous = {key.name: key for key in self._by_digest.values()}
        self._by_digest = {
            line.digest: ApiKey(line.name, line.digest, self._own_buckets(line, previous.get(line.name)))
            for line in lines
        }

    def _own_buckets(self, line: KeyLine, previous: ApiKey | None) -> Buckets | None:
        limiter = self.limiter
        if limiter is None or not line.limits:
            return None
        limits = {**limiter.limits, **line.limits}  # scopes the line leaves out keep the server's limits
        if limits == limiter.limits:
            return None  # the server's own limits: its limiter, bucket key:<name>
        if previous is not None and previous.buckets is not None and previous.buckets.local.limits == limits:
            return previous.buckets  # unchanged: the key keeps its buckets across a reload
        local = RateLimiter(limits, max_clients=1, clock=self.clock)  # one client: key:<name>
        local.rejections = limiter.rejections  # one count of refusals per scope in /metrics
        shared = SharedRateLimiter(local, self.store) if self.store is not None else None
        return Buckets(local, shared)

    async def reload(self) -> bool:
        """Re-read the file now (SIGHUP); whether its keys are now in force."""
        async with self._lock:
            self._on_disk.forget()
            return await self._load(stat_of(self.path), "on request")

    async def check(self) -> bool:
        """One poll: reload the file when its change has held still for one interval; whether it did."""
        async with self._lock:
            key = self._on_disk.settled_change()
            return False if key is None else await self._load(key, "it changed on disk")

    async def _load(self, key: FileStat, why: str) -> bool:
        before = set(self.names)
        if not key.exists and not self.path.exists():
            # Gone (issue 23, point 10): deleting the file is how an operator revokes everything in a hurry, and
            # keys nobody can see any more must not stay in force in silence. Every API request is 401 until a
            # file is back; the routes that need no key stay open.
            self._install([])
            self._on_disk.loaded(key)
            self.reloads["removed"] += 1
            log.error(
                "the API key file %s is gone (%s): its %d keys are revoked, every API request is refused 401 "
                "until a key file is back",
                self.path,
                why,
                len(before),
            )
            return True
        try:
            lines = await asyncio.to_thread(read_key_file, self.path)
        except KeyFileError as exc:
            self.reloads["error"] += 1
            self._on_disk.refused(key)
            log.error("refused the new API key file (%s): %s; the %d keys in force stay", why, exc, len(before))
            return False
        self._install(lines)
        self._on_disk.loaded(key)
        self.reloads["ok"] += 1
        after = set(self.names)
        log.info(
            "reloaded the API key file %s (%s): %d keys; added: %s; removed: %s",
            self.path,
            why,
            len(after),
            ", ".join(sorted(after - before)) or "none",
            ", ".join(sorted(before - after)) or "none",
        )
        return True

    def start(self) -> None:
        self._task.start(lambda: poll(self.interval, self.check, "the API key file", log))

    async def close(self) -> None:
        await self._task.stop()
