"""Configuration: the ``IPINTEL_*`` environment variables (docs/CONFIGURATION.md), parsed once.

The app factory takes a :class:`Settings`; nothing else reads the
environment, so tests build settings directly and point every upstream at a
local server.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipintel.infra.feed_catalogue import FEED_NAMES  # the names IPINTEL_FEED_URLS accepts
from ipintel.infra.limiter import Quota
from ipintel.infra.shared import redacted_url

DEFAULT_CITY_DB_NAME = "dbip-city-lite.mmdb"
# The files scripts/fetch-geoip writes into the data directory; used when IPINTEL_GEOIP_CITY_DB or
# IPINTEL_GEOIP_ASN_DB is unset, each only if it exists (docs/CONFIGURATION.md#geoip-databases).
DEFAULT_CITY_DB_NAMES = (DEFAULT_CITY_DB_NAME, "dbip-city-lite-ipv6.mmdb")
DEFAULT_ASN_DB_NAMES = ("dbip-asn-lite.mmdb",)

# One path or several (asked in order, the first record wins); None: the default, where there is one.
DbPaths = Path | tuple[Path, ...] | None

# Alive, free-for-modest-use DNSBLs (docs/API.md#blacklist). Dead lists (SORBS, NiX Spam)
# are deliberately absent: a dead list either lists everything or nothing.
DEFAULT_DNSBL_ZONES: tuple[str, ...] = (
    "zen.spamhaus.org",
    "bl.spamcop.net",
    "psbl.surriel.com",
    "dnsbl.dronebl.org",
    "all.s5h.net",
)

DEFAULT_RATE_LIMITS: dict[Quota, int] = {Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10}

LOG_FORMATS = ("auto", "json", "text")

MAX_WORKERS = 64  # IPINTEL_WORKERS: 1..64


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path("data")
    geoip_city_db: DbPaths = None  # None: <data_dir>/dbip-city-lite.mmdb and dbip-city-lite-ipv6.mmdb
    geoip_asn_db: DbPaths = None  # None: <data_dir>/dbip-asn-lite.mmdb when it exists, else Team Cymru
    geoip_anonymous_db: DbPaths = None
    geoip_connection_db: DbPaths = None
    # Seconds after its build date past which a .mmdb file is reported stale; None: twice its publisher's
    # interval (ipintel/infra/freshness.py).
    geoip_max_age: float | None = None
    dns_servers: tuple[tuple[str, int], ...] = ()  # empty: the system resolver
    dns_timeout: float = 2.0
    dnsbl_zones: tuple[str, ...] = DEFAULT_DNSBL_ZONES
    reputation_url: str = "https://api.stopforumspam.org/api"
    abuseipdb_key: str | None = None
    abuseipdb_url: str = "https://api.abuseipdb.com/api/v2/check"
    rdap_bootstrap_url: str = "https://data.iana.org/rdap/"
    upstream_timeout: float = 5.0
    cymru_zone: str = "asn.cymru.com"
    feeds_enabled: bool = True
    feed_urls: Mapping[str, str | None] = field(default_factory=dict)  # None: disabled
    spamhaus_dqs_key: str | None = None
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    rate_limits: Mapping[Quota, int] | None = field(default_factory=lambda: dict(DEFAULT_RATE_LIMITS))  # None: off
    mcp_allowed_origins: tuple[str, ...] = ("http://localhost:*", "http://127.0.0.1:*")
    # The Host names requests may name (docs/CONFIGURATION.md, DNS rebinding); None: the default of the bind
    # address (loopback names on a loopback bind, any name otherwise), ("*",): any.
    allowed_hosts: tuple[str, ...] | None = None
    # "text", "json" or "auto": text when the logs' stream is a terminal, else JSON (decided by logs.configure).
    log_format: str = "auto"
    log_level: str = "INFO"
    # Bounds a serious deployment wants to tune (docs/CONFIGURATION.md).
    blacklist_deadline: float = 3.0
    max_body_bytes: int = 1024 * 1024
    # Addresses one POST /ip/batch may hold (docs/API.md#profile-and-batch).
    batch_max: int = 1000
    cache_max_entries: int = 10_000
    rate_limit_max_clients: int = 100_000
    # Seconds between checks of the .mmdb files' mtime and size; a replaced file is reloaded (docs/API.md#operations).
    db_check_interval: float = 5.0
    # The API key file (docs/API.md#authentication; ipintel/web/api_keys.py); None: no key is needed.
    api_keys_file: Path | None = None
    # Serving processes on the one port (ipintel/supervisor.py); 1 is a single process with no supervisor.
    workers: int = 1
    # Shared state on Redis/Valkey (rate limits, upstream caches); None: every process keeps its own.
    redis_url: str | None = None
    # Seconds one Redis operation may take before the request goes on with in-process state (ipintel/infra/shared.py).
    redis_timeout: float = 0.05
    redis_namespace: str = ""  # IPINTEL_REDIS_NAMESPACE: this deployment's part of the Redis key names
    redis_password_file: Path | None = None  # IPINTEL_REDIS_PASSWORD_FILE: a mounted secret, read at start

    @property
    def city_db_paths(self) -> tuple[Path, ...]:
        return _paths(self.geoip_city_db) or tuple(self.data_dir / name for name in DEFAULT_CITY_DB_NAMES)

    @property
    def asn_db_paths(self) -> tuple[Path, ...]:
        return _paths(self.geoip_asn_db) or tuple(self.data_dir / name for name in DEFAULT_ASN_DB_NAMES)

    @property
    def default_db_kinds(self) -> frozenset[str]:
        """The kinds whose paths are the defaults: each file need not exist (used when it does)."""
        return frozenset(
            kind for kind, value in (("city", self.geoip_city_db), ("asn", self.geoip_asn_db)) if not _paths(value)
        )

    @property
    def city_db_path(self) -> Path:
        """The first City database path (logs)."""
        return self.city_db_paths[0]

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the variables of docs/CONFIGURATION.md; unset or empty variables keep their defaults."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}

        def get(name: str) -> str | None:
            value = env.get(f"IPINTEL_{name}")
            return value.strip() if value is not None and value.strip() else None

        if (v := get("HOST")) is not None:
            values["host"] = v
        if (v := get("PORT")) is not None:
            values["port"] = _int("IPINTEL_PORT", v, 0, 65535)
        if (v := get("DATA_DIR")) is not None:
            values["data_dir"] = Path(v)
        for var, attr in (
            ("GEOIP_CITY_DB", "geoip_city_db"),
            ("GEOIP_ASN_DB", "geoip_asn_db"),
            ("GEOIP_ANONYMOUS_DB", "geoip_anonymous_db"),
            ("GEOIP_CONNECTION_DB", "geoip_connection_db"),
        ):
            if (v := get(var)) is not None:
                values[attr] = tuple(Path(item) for item in _items(v))
        if (v := get("GEOIP_MAX_AGE")) is not None:
            values["geoip_max_age"] = _int("IPINTEL_GEOIP_MAX_AGE", v, 1, 3650) * 86_400.0
        if (v := get("DNS_SERVERS")) is not None:
            values["dns_servers"] = parse_servers(v)
        if (v := get("DNS_TIMEOUT")) is not None:
            values["dns_timeout"] = _float("IPINTEL_DNS_TIMEOUT", v)
        if (v := get("DNSBL_ZONES")) is not None:
            values["dnsbl_zones"] = tuple(z.lower().rstrip(".") for z in _items(v))
        if (v := get("REPUTATION_URL")) is not None:
            values["reputation_url"] = v
        if (v := get("ABUSEIPDB_KEY")) is not None:
            values["abuseipdb_key"] = v
        if (v := get("ABUSEIPDB_URL")) is not None:
            values["abuseipdb_url"] = v
        if (v := get("RDAP_BOOTSTRAP_URL")) is not None:
            values["rdap_bootstrap_url"] = v if v.endswith("/") else v + "/"
        if (v := get("UPSTREAM_TIMEOUT")) is not None:
            values["upstream_timeout"] = _float("IPINTEL_UPSTREAM_TIMEOUT", v)
        if (v := get("CYMRU_ZONE")) is not None:
            values["cymru_zone"] = v.lower().rstrip(".")
        if (v := get("FEEDS")) is not None:
            values["feeds_enabled"] = _bool("IPINTEL_FEEDS", v)
        if (v := env.get("IPINTEL_FEED_URLS")) is not None and v.strip():
            values["feed_urls"] = parse_feed_urls(v)
        if (v := get("SPAMHAUS_DQS_KEY")) is not None:
            values["spamhaus_dqs_key"] = v
        if (v := get("TRUSTED_PROXIES")) is not None:
            values["trusted_proxies"] = parse_networks("IPINTEL_TRUSTED_PROXIES", v)
        if (v := get("RATE_LIMITS")) is not None:
            values["rate_limits"] = parse_rate_limits(v)
        if (v := get("MCP_ALLOWED_ORIGINS")) is not None:
            values["mcp_allowed_origins"] = tuple(_items(v))
        if (v := get("ALLOWED_HOSTS")) is not None:
            values["allowed_hosts"] = parse_allowed_hosts(v)
        if (v := get("LOG_FORMAT")) is not None:
            if v.lower() not in LOG_FORMATS:
                raise ConfigError(
                    f"IPINTEL_LOG_FORMAT must be 'text', 'json' or 'auto' (text on a terminal, else json), not {v!r}"
                )
            values["log_format"] = v.lower()
        if (v := get("LOG_LEVEL")) is not None:
            values["log_level"] = v.upper()
        if (v := get("BLACKLIST_DEADLINE")) is not None:
            values["blacklist_deadline"] = _float("IPINTEL_BLACKLIST_DEADLINE", v)
        if (v := get("MAX_BODY_BYTES")) is not None:
            values["max_body_bytes"] = _int("IPINTEL_MAX_BODY_BYTES", v, 1024, 1 << 30)
        if (v := get("BATCH_MAX")) is not None:
            values["batch_max"] = _int("IPINTEL_BATCH_MAX", v, 1, 100_000)
        if (v := get("CACHE_MAX_ENTRIES")) is not None:
            values["cache_max_entries"] = _int("IPINTEL_CACHE_MAX_ENTRIES", v, 1, 10_000_000)
        if (v := get("RATE_LIMIT_MAX_CLIENTS")) is not None:
            values["rate_limit_max_clients"] = _int("IPINTEL_RATE_LIMIT_MAX_CLIENTS", v, 1, 10_000_000)
        if (v := get("DB_CHECK_INTERVAL")) is not None:
            values["db_check_interval"] = _float("IPINTEL_DB_CHECK_INTERVAL", v)
        if (v := get("API_KEYS_FILE")) is not None:
            values["api_keys_file"] = Path(v)
        if (v := get("WORKERS")) is not None:
            values["workers"] = _int("IPINTEL_WORKERS", v, 1, MAX_WORKERS)
        if (v := get("REDIS_URL")) is not None:
            values["redis_url"] = parse_redis_url(v)
        if (v := get("REDIS_TIMEOUT")) is not None:
            values["redis_timeout"] = _float("IPINTEL_REDIS_TIMEOUT", v)
        if (v := get("REDIS_PASSWORD_FILE")) is not None:
            values["redis_password_file"] = Path(v)
        if (v := get("REDIS_NAMESPACE")) is not None:
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", v):
                raise ConfigError(f"IPINTEL_REDIS_NAMESPACE: {v[:80]!r} is not 1 to 64 of A-Z a-z 0-9 . _ -")
            values["redis_namespace"] = v
        settings = cls(**values)  # type: ignore[arg-type]
        check_workers(settings)
        return settings


def check_workers(settings: Settings) -> None:
    """Several workers with rate limits need a shared store for the buckets: refused otherwise."""
    n = settings.workers
    if n > 1 and settings.rate_limits is not None and settings.redis_url is None:
        raise ConfigError(
            f"IPINTEL_WORKERS={n} with rate limits on needs IPINTEL_REDIS_URL: without a shared store each worker "
            f"keeps its own rate-limit buckets, so a client spread over the workers would get up to {n} times its "
            "limit. Either set IPINTEL_REDIS_URL (Redis or Valkey) to share the buckets, or set "
            "IPINTEL_RATE_LIMITS=off (e.g. when a gateway in front limits the clients)"
        )


# Query parameters of a Redis URL that carry a secret (redis-py reads password= and username= from the query,
# the only way to give a unix socket's password).


_HOST_PATTERN = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|[0-9a-f:.]+")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """``IPINTEL_ALLOWED_HOSTS``: host names (``api.example.com``), ``*.example.com`` (its subdomains), IP
    addresses, or ``*`` (any), comma separated; no ports (any port of an allowed name is allowed)."""
    hosts = []
    for item in _items(text):
        host = item.lower().rstrip(".").removeprefix("[").removesuffix("]")
        if host != "*" and not _HOST_PATTERN.fullmatch(host):
            raise ConfigError(f"IPINTEL_ALLOWED_HOSTS: {item[:80]!r} is not a host name, *.domain, an address or *")
        hosts.append(host)
    return tuple(hosts)


def allowed_hosts(settings: Settings) -> tuple[str, ...] | None:
    """The Host names a request may name; ``None``: any. Without IPINTEL_ALLOWED_HOSTS, a server bound to a
    loopback address answers only its loopback names, which no web page can make a browser send to it (DNS
    rebinding, docs/CONFIGURATION.md); a server bound elsewhere answers any name (its names are the operator's:
    a Service's, a gateway's) unless told."""
    if settings.allowed_hosts is not None:
        return None if "*" in settings.allowed_hosts else settings.allowed_hosts
    try:
        loopback = settings.host == "localhost" or ipaddress.ip_address(settings.host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    return LOOPBACK_HOSTS if loopback else None


def parse_redis_url(text: str) -> str:
    """A Redis or Valkey URL: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) or
    ``unix:///path/to/socket``."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("redis", "rediss", "unix") or not rest.strip("/"):
        raise ConfigError(
            f"IPINTEL_REDIS_URL: {redacted_url(text)!r} is not a redis://host:port/db, rediss:// (TLS) or "
            "unix:///socket URL"
        )
    return text


def parse_servers(text: str) -> tuple[tuple[str, int], ...]:
    """``host`` or ``host:port``, comma separated; IPv6 as ``[::1]:5353`` or bare ``::1``."""
    servers = []
    for item in _items(text):
        host, port = item, 53
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            if rest:
                port = _int("IPINTEL_DNS_SERVERS", rest.lstrip(":"), 1, 65535)
        elif item.count(":") == 1:
            host, _, p = item.partition(":")
            port = _int("IPINTEL_DNS_SERVERS", p, 1, 65535)
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ConfigError(f"IPINTEL_DNS_SERVERS: {host!r} is not an IP address") from None
        servers.append((host, port))
    return tuple(servers)


def parse_feed_urls(text: str) -> dict[str, str | None]:
    """``name=url`` per feed; an empty url disables the feed."""
    form = f"name=url with a name from {', '.join(FEED_NAMES)}"
    return {name: url or None for name, url in _assignments("IPINTEL_FEED_URLS", text, FEED_NAMES, form)}


def parse_networks(var: str, text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for item in _items(text):
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(f"{var}: {item!r} is not an address or CIDR range") from None
    return tuple(nets)


def parse_rate_limits(text: str) -> dict[Quota, int] | None:
    """``off``, or ``quota=N`` per quota to change (requests per minute); the others keep their defaults."""
    if text.lower() == "off":
        return None
    limits = dict(DEFAULT_RATE_LIMITS)
    form = f"scope=N with a scope of {', '.join(Quota)}"  # "scope", as docs/CONFIGURATION.md words it
    for name, value in _assignments("IPINTEL_RATE_LIMITS", text, tuple(Quota), form):
        limits[Quota(name)] = _int("IPINTEL_RATE_LIMITS", value, 1, 1_000_000)
    return limits


def _paths(value: DbPaths) -> tuple[Path, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, Path) else tuple(value)


def _items(text: str) -> Iterator[str]:
    """The items of a comma-separated list, stripped; empty ones are skipped."""
    return (item for item in (part.strip() for part in text.split(",")) if item)


def _assignments(var: str, text: str, names: Iterable[str], form: str) -> Iterator[tuple[str, str]]:
    """The ``name=value`` items of a comma-separated list as (lower-case name, stripped value); an item
    without ``=`` or with a name not in ``names`` is a :class:`ConfigError` saying it is not ``form``."""
    known = frozenset(names)
    for item in _items(text):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if not sep or name not in known:
            raise ConfigError(f"{var}: {item!r} is not {form}")
        yield name, value.strip()


def _int(var: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{var}: {text!r} is not a whole number") from None
    if not low <= value <= high:
        raise ConfigError(f"{var}: {value} is outside {low}..{high}")
    return value


def _float(var: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{var}: {text!r} is not a number of seconds") from None
    if not 0 < value <= 600:
        raise ConfigError(f"{var}: {value} must be above 0 and at most 600 seconds")
    return value


def _bool(var: str, text: str) -> bool:
    lowered = text.lower()
    if lowered in ("on", "true", "1", "yes"):
        return True
    if lowered in ("off", "false", "0", "no"):
        return False
    raise ConfigError(f"{var}: {text!r} is not on or off")
