"""API keys (docs/API.md#authentication): the key file, the check of a request's key, and the file's reload.

With ``IPINTEL_API_KEYS_FILE`` set, every request to an API route (the REST
resources and ``/mcp``) must present a key, as ``Authorization: Bearer <key>``
or ``X-API-Key: <key>``. The request gate (:class:`~ipintel.web.gate.RateLimitGate`)
calls :meth:`ApiKeys.authenticate` before it spends a token: a request without
a valid key spends nothing and is answered 401 ``unauthorized`` at once
(:class:`Unauthorized`). An accepted request's :class:`~ipintel.web.client.Caller`
carries the key's name, its rate-limit bucket is ``key:<name>`` (every client of
a key shares its buckets, wherever it connects from) and, when the file gives
the key limits of its own, the limiter of those limits.

The file holds one key a line, ``<name> sha256:<hex digest of the key> [general=N,dns=N,registry=N]``;
``#`` starts a comment. It stores digests, never keys: a request's key is hashed
(SHA-256), looked up by its digest and compared in constant time. Names are what
logs and metrics show; a key or a digest is never logged or exported.

The file is read at start (an unusable file is a configuration error, exit 2)
and re-read on SIGHUP and when it is replaced, as the ``.mmdb`` files are
(:mod:`ipintel.infra.reload`): its inode, mtime and size are polled, and a
change is acted on once it has held still for one interval. A new file that
cannot be used is refused: the keys in force stay, and the refusal is logged
at ERROR with the line number and the reason, never the line.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import logging
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import Scope, Send

from ipintel.errors import ApiError
from ipintel.infra.background import BackgroundTask, poll
from ipintel.infra.file_watch import FileStat, SettledFile, stat_of
from ipintel.infra.limiter import Clock, Quota, RateLimiter
from ipintel.infra.shared import SharedRateLimiter
from ipintel.settings import ConfigError
from ipintel.web.client import Caller
from ipintel.web.gate import PathQuotas, Rule
from ipintel.web.responses import raw_headers, rpc_refusal_body, send_body, send_error

if TYPE_CHECKING:
    from ipintel.infra.shared import SharedStore
    from ipintel.settings import Settings

log = logging.getLogger("ipintel.api_keys")

NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")  # fullmatch
_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")  # fullmatch
MAX_FILE_BYTES = 1 << 20  # a key file is a few lines; a larger file is a mistake, not a key list
MAX_KEY_BYTES = 1024  # a presented key longer than this is not one of ours: refused without hashing
MIN_KEY_BYTES = 32  # a presented key shorter than this is refused: keys are long random strings (make api-key: 43)
MAX_LIMIT = 1_000_000  # per minute, as IPINTEL_RATE_LIMITS
BUCKET_PREFIX = "key:"  # the rate-limit key of an API key's requests: key:<name> (never an address)
REALM = 'Bearer realm="ipintel"'


class KeyFileError(ConfigError):
    """A key file that cannot be used. The message names the file and the line, never a line's text."""


@dataclass(frozen=True, slots=True)
class KeyLine:
    """One key of the file: its name, the SHA-256 digest of the key, the limits it sets (only those given)."""

    name: str
    digest: bytes
    limits: Mapping[Quota, int] | None
    line: int


def parse_key_file(text: str, source: str = "IPINTEL_API_KEYS_FILE") -> list[KeyLine]:
    """The keys of a key file's text; a :class:`KeyFileError` naming ``source`` and the line number for the
    first line that cannot be used (the message never repeats the line: it may hold a digest, or a key pasted
    by mistake)."""
    keys: list[KeyLine] = []
    names: dict[str, int] = {}
    digests: dict[bytes, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.partition("#")[0].split()
        if not fields:
            continue

        def fail(reason: str, number: int = number) -> KeyFileError:
            return KeyFileError(f"{source} line {number}: {reason}")

        # No message repeats a field: a key pasted alone on a line is its first field (issue 23, point 4).
        if len(fields) > 3:
            raise fail("a line is <name> sha256:<hex digest> [general=N,dns=N,registry=N], with no more fields")
        if not NAME.fullmatch(fields[0]):
            raise fail("the name must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
        name = fields[0]
        if len(fields) < 2:
            raise fail(
                "a name without a digest: give sha256:<64 hexadecimal digits> after it (make api-key); if this "
                "line is a key pasted by mistake, remove it and revoke that key"
            )
        if looks_like_a_key(name):
            raise fail(
                "the name looks like a key (40 or more characters mixing upper case, lower case and digits): names "
                "are labels shown in logs and metrics; a key never belongs in this file (make api-key)"
            )
        digest_match = _DIGEST.fullmatch(fields[1])
        if digest_match is None:
            raise fail("the digest must be sha256: followed by 64 hexadecimal digits (make api-key)")
        digest = bytes.fromhex(digest_match.group(1))
        limits = _parse_limits(fields[2], name, fail) if len(fields) == 3 else None
        if name in names:
            raise fail(f"the name is already used on line {names[name]}")
        if digest in digests:
            raise fail(f"the key is the same key as on line {digests[digest]}")
        names[name] = digests[digest] = number
        keys.append(KeyLine(name, digest, limits, number))
    # A name whose SHA-256 is a digest of the file is that key itself, written where its name goes.
    for line in keys:
        if hashlib.sha256(line.name.encode()).digest() in digests:
            raise KeyFileError(f"{source} line {line.line}: the name is a key of this file: never write a key here")
    return keys


def looks_like_a_key(name: str) -> bool:
    """A name of 40+ characters mixing upper case, lower case and digits: what ``make api-key`` prints (43
    characters of URL-safe base64), not what anyone names a client."""
    return (
        len(name) >= 40
        and any(c.isupper() for c in name)
        and any(c.islower() for c in name)
        and any(c.isdigit() for c in name)
    )


def _parse_limits(text: str, name: str, fail: Any) -> dict[Quota, int]:
    limits: dict[Quota, int] = {}
    for item in text.split(","):
        quota, sep, value = item.partition("=")
        if not sep or quota.lower() not in tuple(Quota) or not value.isdigit():
            raise fail(f"the limits must be scope=N items, comma separated, scopes {', '.join(Quota)}")
        if Quota(quota.lower()) in limits:
            raise fail(f"the limits name the {quota.lower()} scope twice")
        number = int(value)
        if not 1 <= number <= MAX_LIMIT:
            raise fail(f"the {quota.lower()} limit must be 1 to {MAX_LIMIT} per minute")
        limits[Quota(quota.lower())] = number
    return limits


def read_key_file(path: Path) -> list[KeyLine]:
    """The keys of the file at ``path``; a :class:`KeyFileError` when it cannot be read or used."""
    source = f"IPINTEL_API_KEYS_FILE {path}"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise KeyFileError(f"{source}: is over {MAX_FILE_BYTES} bytes; a key file holds a line per key")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise KeyFileError(f"{source} line {line}: is not UTF-8 text") from None
    return parse_key_file(text, source)


def bucket_of(name: str) -> str:
    """The rate-limit key of the requests made with the key ``name``."""
    return BUCKET_PREFIX + name


@dataclass(frozen=True, slots=True)
class OwnLimits:
    """The rate limiter of a key whose line gives limits of its own (docs/API.md#authentication): an
    in-process limiter with those limits and, with ``IPINTEL_REDIS_URL``, the shared one in front of it."""

    limits: Mapping[Quota, int]
    local: RateLimiter
    shared: SharedRateLimiter | None

    @property
    def spender(self) -> RateLimiter | SharedRateLimiter:
        """What :func:`~ipintel.web.gate.quota_spender` spends the key's further tokens through."""
        return self.shared if self.shared is not None else self.local


def limiter_for(
    caller: Caller, default: RateLimiter | SharedRateLimiter | None
) -> RateLimiter | SharedRateLimiter | None:
    """The limiter the caller's further tokens (an MCP tool's, a profile part's) are spent through: its key's
    own limits, else ``default`` (``app.state.limiter``, the server's)."""
    return default if caller.limits is None else caller.limits.spender


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key in force."""

    name: str
    digest: bytes
    limits: OwnLimits | None  # None: the server's limits (IPINTEL_RATE_LIMITS), or limits are off


class Unauthorized(ApiError):
    """401 ``unauthorized``: the request presented no key, a malformed one, or one that is not in the file.
    Raised by :meth:`ApiKeys.authenticate` inside the request gate; the request middleware answers it with
    :meth:`send` before any token is spent."""

    def __init__(self, message: str, error: str | None = None) -> None:
        # RFC 6750 section 3: no error attribute when the request carried no credentials at all.
        challenge = REALM if error is None else f'{REALM}, error="{error}"'
        super().__init__("unauthorized", message, headers={"WWW-Authenticate": challenge})

    async def send(self, send: Send, scope: Scope) -> None:
        """The 401: a REST error body, or on ``/mcp`` (which always answers JSON-RPC) a JSON-RPC error."""
        path = scope["path"]
        if path == "/mcp" or path.startswith("/mcp/"):
            body = rpc_refusal_body(self.message, {"httpStatus": 401, "code": "unauthorized"})
            await send_body(send, 401, body, raw_headers(self.headers))
        else:
            await send_error(send, self, head=scope.get("method") == "HEAD")


_MESSAGES = {
    "missing": "this server requires an API key: send it as Authorization: Bearer <key> (or X-API-Key: <key>)",
    "malformed": "the Authorization header must be 'Bearer <key>' (or send the key as X-API-Key: <key>)",
    "invalid": "the API key is not valid: it is not one of this server's keys (mistyped or revoked)",
    "short": f"the API key is not valid: keys are at least {MIN_KEY_BYTES} characters (make api-key makes them)",
}
# The error attribute of the challenge (RFC 6750 section 3.1): none when no key was sent at all.
_CHALLENGE_ERRORS = {
    "missing": None,
    "malformed": "invalid_request",
    "invalid": "invalid_token",
    "short": "invalid_token",
}


def refusal(reason: str) -> Unauthorized:
    """The 401 of ``reason``: ``missing``, ``malformed`` or ``invalid``."""
    return Unauthorized(_MESSAGES[reason], _CHALLENGE_ERRORS[reason])


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | str:
    """The key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key: <key>``; else why there
    is none (``missing`` or ``malformed``). A Bearer key wins over X-API-Key."""
    authorization: bytes | None = None
    api_key: bytes | None = None
    for name, value in headers:
        if name == b"authorization" and authorization is None:
            authorization = value
        elif name == b"x-api-key" and api_key is None:
            api_key = value
    if authorization is not None:
        scheme, _, token = authorization.strip().partition(b" ")
        if scheme.lower() == b"bearer":
            token = token.strip()
            return token if token and b" " not in token else "malformed"
        if api_key is None:
            return "malformed"  # another scheme (Basic ...) and no X-API-Key
    if api_key is None:
        return "missing"
    api_key = api_key.strip()
    return api_key if api_key else "malformed"


class ApiKeys:
    """The keys in force (``IPINTEL_API_KEYS_FILE``), the check of each request, and the file's reloads.

    ``rules``: the paths that need a key (the rate-limit rules: every REST resource and ``/mcp``); other
    paths (``/healthz``, ``/readyz``, ``/metrics``, ``/openapi.json``, ``/docs``, the page) stay open.
    ``limiter``: the server's rate limiter (``None``: limits are off, and a key's own limits do nothing);
    ``store``: Redis (``IPINTEL_REDIS_URL``), where the buckets of keys with limits of their own live too.

    Counters for /metrics: ``requests`` (key name -> requests accepted), ``refusals`` (``missing``,
    ``malformed``, ``invalid`` -> 401s), ``reloads`` (``ok``/``error`` -> loads of a new file)."""

    def __init__(
        self,
        path: Path,
        keys: Iterable[KeyLine],
        *,
        rules: Iterable[Rule],
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
        self._protected = PathQuotas(rules)
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
        rules: Iterable[Rule],
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
            rules=rules,
            limiter=limiter,
            store=store if limiter is not None else None,
            clock=clock,
            interval=settings.db_check_interval,
        )

    # The check ------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return sorted(key.name for key in self._by_digest.values())

    def protects(self, path: str) -> bool:
        """Whether ``path`` needs a key (an API route; the operations routes and the page stay open)."""
        return self._protected.quota_of(path) is not None

    def authenticate(self, scope: Scope, caller: Caller) -> Caller:
        """The request's caller, as its key makes it (name, bucket, limits), or ``caller`` itself on an open
        route or a CORS preflight; :class:`Unauthorized` without a valid key."""
        if scope["method"] == "OPTIONS" or self._protected.quota_of(scope["path"]) is None:
            return caller
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
        return Caller(caller.ip, bucket_of(key.name), key.name, key.limits)

    # Loading ----------------------------------------------------------------------------

    def _install(self, lines: list[KeyLine]) -> None:
        previous = {key.name: key for key in self._by_digest.values()}
        self._by_digest = {
            line.digest: ApiKey(line.name, line.digest, self._own_limits(line, previous.get(line.name)))
            for line in lines
        }

    def _own_limits(self, line: KeyLine, previous: ApiKey | None) -> OwnLimits | None:
        limiter = self.limiter
        if limiter is None or not line.limits:
            return None
        limits = {**limiter.limits, **line.limits}  # scopes the line leaves out keep the server's limits
        if limits == limiter.limits:
            return None  # the server's own limits: its limiter, bucket key:<name>
        if previous is not None and previous.limits is not None and previous.limits.limits == limits:
            return previous.limits  # unchanged: the key keeps its buckets across a reload
        local = RateLimiter(limits, max_clients=1, clock=self.clock)  # one client: key:<name>
        local.rejections = limiter.rejections  # one count of refusals per scope in /metrics
        shared = SharedRateLimiter(local, self.store) if self.store is not None else None
        return OwnLimits(limits, local, shared)

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

    # /metrics and /openapi.json ---------------------------------------------------------------

    def collector(self) -> Collector:
        return _KeysCollector(self)

    def document(self, document: dict[str, Any]) -> None:
        """Add the authentication to the OpenAPI document: the security schemes, and on every operation of a
        route that needs a key its ``security`` and its 401 answer."""
        components = document.setdefault("components", {})
        components["securitySchemes"] = {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key of IPINTEL_API_KEYS_FILE: Authorization: Bearer <key>",
            },
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The same key"},
        }
        challenge = {
            "WWW-Authenticate": {
                "description": 'Bearer realm="ipintel", with error="invalid_token" or "invalid_request" when a key '
                "was sent",
                "schema": {"type": "string"},
            }
        }
        paths = document.get("paths", {})
        for path in list(paths):
            if not self.protects(path):
                continue
            # A copy: the items of the operations routes and /mcp are module constants, shared by every app.
            item = paths[path] = copy.deepcopy(paths[path])
            mcp = path == "/mcp" or path.startswith("/mcp/")
            schema = {"$ref": "#/components/schemas/McpResponse" if mcp else "#/components/schemas/Error"}
            for method, operation in item.items():
                if method == "options" or not isinstance(operation, dict) or "responses" not in operation:
                    continue
                operation["security"] = [{"bearer": []}, {"apiKey": []}]
                description = (
                    "No valid API key (JSON-RPC error -32000, data.httpStatus 401)"
                    if mcp
                    else "Error codes: `unauthorized` (no API key, a malformed header, or a key not in force)"
                )
                operation["responses"]["401"] = {
                    "description": description,
                    "headers": dict(challenge),
                    "content": {"application/json": {"schema": dict(schema)}},
                }
                operation["responses"] = dict(sorted(operation["responses"].items()))


class _KeysCollector(Collector):
    """The keys' series, read at scrape time: names only, never a key or a digest."""

    def __init__(self, keys: ApiKeys) -> None:
        self.keys = keys

    def collect(self) -> Iterator[Metric]:
        keys = self.keys
        loaded = GaugeMetricFamily("ipintel_api_keys", "API keys in force (IPINTEL_API_KEYS_FILE).")
        loaded.add_metric([], len(keys.names))
        yield loaded
        requests = CounterMetricFamily(
            "ipintel_api_key_requests", "Requests accepted with an API key, by the key's name.", labels=["key"]
        )
        for name, count in sorted(keys.requests.items()):
            requests.add_metric([name], count)
        yield requests
        refusals = CounterMetricFamily(
            "ipintel_api_key_refusals",
            "Requests refused 401: no key (missing), a malformed header, or a key not in force (invalid).",
            labels=["reason"],
        )
        for reason in ("missing", "malformed", "invalid"):
            refusals.add_metric([reason], keys.refusals[reason])
        yield refusals
        reloads = CounterMetricFamily(
            "ipintel_api_key_file_reloads", "Loads of a new API key file, by outcome.", labels=["outcome"]
        )
        for outcome in ("ok", "error", "removed"):
            reloads.add_metric([outcome], keys.reloads[outcome])
        yield reloads
