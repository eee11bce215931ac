"""The capabilities bound to their infrastructure: what REST routes and MCP tools call.

:class:`Intel` is the single place where client text is parsed into
canonical input, caches are consulted, and a capability function is run with
the infrastructure it needs (databases, resolver, HTTP client). The REST
routes (``ipintel.api``) and the MCP tools (``ipintel.api.mcp``) are thin
adapters over its methods, so both share one behaviour and one set of caches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ipintel import addresses
from ipintel.capabilities import blacklist, cidr, dns, geoip, layouts, profile, reputation, vpn, whois
from ipintel.capabilities.asn import AsnInfo, AsnPrefixes, AsnSource, MmdbAsnSource
from ipintel.capabilities.cymru import CymruAsnSource
from ipintel.errors import ApiError
from ipintel.infra import cache
from ipintel.infra.feeds import FeedManager
from ipintel.infra.limiter import Quota, Spend, spend_nothing
from ipintel.infra.mmdb import GeoDatabases
from ipintel.infra.rdap_bootstrap import RdapBootstrap
from ipintel.infra.registry_gate import RegistryGate
from ipintel.infra.resolver import Resolver
from ipintel.infra.shared import SharedStore
from ipintel.infra.stats import UpstreamStats
from ipintel.infra.upstream import HttpClient
from ipintel.settings import ConfigError, Settings

log = logging.getLogger("ipintel.service")

# Seconds GET /asn/{asn} waits for the ASN database's AS -> networks index, built in the background after
# a (re)load (a few seconds for a large file); past it ``prefixes`` is null (docs/API.md#as-record).
INDEX_WAIT = 10.0


class Intel:
    """Every capability of the service, with its infrastructure injected."""

    def __init__(
        self,
        settings: Settings,
        *,
        databases: GeoDatabases,
        http: HttpClient,
        asn_source: AsnSource,
        timezones: geoip.TimeZones,
        caches: dict[str, cache.Cache] | None = None,
        resolver: Resolver | None = None,
        rdap_bootstrap: RdapBootstrap | None = None,
        feeds: FeedManager | None = None,
        shared: SharedStore | None = None,
    ) -> None:
        self.settings = settings
        self.databases = databases
        self.http = http
        self.asn_source = asn_source
        self.timezones = timezones
        self.upstream_stats = http.stats
        # The one DNS resolver (/dns, Team Cymru, DNSBLs), counting its queries in the same statistics.
        self.resolver = resolver or Resolver(settings.dns_servers, settings.dns_timeout, stats=http.stats)
        # The IANA RDAP bootstrap files, fetched on the first /whois and refreshed daily.
        self.rdap_bootstrap = rdap_bootstrap or RdapBootstrap(settings.rdap_bootstrap_url, http)
        # Address feeds of VPN detection (Tor exits, cloud ranges, VPN and datacenter lists): loaded and
        # refreshed in the background, kept in <data_dir>/feeds so that a restart works offline. Feeds are
        # megabytes, so a download may take 6x IPINTEL_UPSTREAM_TIMEOUT (30 s by default).
        self.feeds = feeds or FeedManager(
            http, settings.data_dir / "feeds", overrides=settings.feed_urls, timeout=6 * settings.upstream_timeout
        )
        # The signal sources of /ip/{ip}/vpn (docs/API.md#vpn-detection), strongest first.
        self.vpn_sources: list[vpn.SignalSource] = [
            vpn.AnonymousIpSource(databases.anonymous),
            vpn.ConnectionTypeSource(databases.connection),
            vpn.FeedSource(self.feeds),
            vpn.AsnClassSource(
                asn_source,
                vpn.AsnClasses.shipped(),
                local=databases.asn is not None and any(f.path.exists() for f in databases.asn.files),
            ),
            vpn.PtrKeywordSource(self.resolver, timeout=min(settings.dns_timeout, 1.0)),
        ]
        # DNSBL zones (Spamhaus through DQS when keyed), their RFC 5782 self-tests in the background,
        # and the reputation database: the sources of /blacklist (docs/API.md#blacklist).
        self.dnsbl_zones = blacklist.build_zones(settings.dnsbl_zones, settings.spamhaus_dqs_key)
        self.dnsbl_tests = blacklist.SelfTests(self.dnsbl_zones, resolver=self.resolver, timeout=settings.dns_timeout)
        self.reputation = reputation.ReputationClient(
            http,
            stopforumspam_url=settings.reputation_url,
            abuseipdb_url=settings.abuseipdb_url,
            abuseipdb_key=settings.abuseipdb_key,
            max_timeout=settings.upstream_timeout,
        )
        # One cache per endpoint family (docs/API.md#caching), shared by REST and MCP; /metrics reads them.
        self.caches = caches if caches is not None else cache.new_caches(settings.cache_max_entries, shared=shared)
        # Redis or Valkey behind the upstream caches and the rate-limit buckets (IPINTEL_REDIS_URL); None: all in process.
        self.shared = shared
        # The parts of a profile (docs/API.md#profile-and-batch): each the method of its own route, the quota
        # one lookup spends per address when it asks an upstream (None: local), and, for RDAP, the batch's
        # gate on the registries.
        self._parts: dict[str, profile.Part] = {
            "geo": profile.Part("geo", None, lambda ip, batch: self.lookup_ip(ip), lambda ip: self._peek_geo("ip", ip)),
            "vpn": profile.Part(
                "vpn", None, lambda ip, batch: self.detect_vpn(ip), lambda ip: self._peek_geo("vpn", ip)
            ),
            "whois": profile.Part(
                "whois", Quota.REGISTRY, lambda ip, batch: self.whois_ip(ip, registries=batch.registries)
            ),
            "blacklist": profile.Part("blacklist", Quota.REGISTRY, lambda ip, batch: self.check_blacklist(ip)),
            "ptr": profile.Part("ptr", Quota.DNS, lambda ip, batch: self.reverse_dns(ip)),
        }
        # A batch's geo and vpn are local (docs/API.md#profile-and-batch, issue 23): they ask no upstream for
        # the request's one token, and say what they did not consult.
        self._batch_parts: dict[str, profile.Part] = {
            **self._parts,
            "geo": profile.Part("geo", None, self._local_geo, lambda ip: self._peek_geo("ip", ip), inline=True),
            "vpn": profile.Part("vpn", None, self._local_vpn, self._peek_local_vpn, inline=True),
        }
        self._geo_generation = 0
        self.databases_opened = False

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: cache.Clock = time.monotonic) -> Intel:
        """``clock`` (monotonic seconds) drives cache lifetimes; tests pass a fake one."""
        databases = GeoDatabases(
            settings.city_db_paths,
            asn=settings.asn_db_paths,
            anonymous=settings.geoip_anonymous_db,
            connection=settings.geoip_connection_db,
            # The AS -> networks index of /asn/{asn} (docs/API.md#as-record), built after each (re)load.
            asn_indexer=AsnPrefixes.build,
            # What each kind's records must give, in the layouts ipintel reads; a file giving none is refused.
            checks=layouts.NEEDS,
            optional=settings.default_db_kinds,
            max_age=settings.geoip_max_age,
        )
        # One statistics object for every upstream client (HTTP and DNS): /metrics reads it.
        stats = UpstreamStats()
        resolver = Resolver(settings.dns_servers, settings.dns_timeout, stats=stats)
        # Shared state (docs/API.md#caching): the upstream caches and the buckets in Redis, when configured.
        shared = (
            SharedStore(
                settings.redis_url,
                timeout=settings.redis_timeout,
                namespace=settings.redis_namespace,
                password=_secret(settings.redis_password_file),
            )
            if settings.redis_url
            else None
        )
        # An ASN .mmdb when configured (or the default one fetched), otherwise Team Cymru's DNS interface
        # (docs/API.md#geoip), which also answers while the default file is not there.
        cymru = CymruAsnSource(resolver, settings.cymru_zone, shared=shared)
        asn_source: AsnSource = MmdbAsnSource(databases.asn, fallback=cymru) if databases.asn else cymru
        return cls(
            settings,
            databases=databases,
            http=HttpClient(timeout=settings.upstream_timeout, stats=stats),
            asn_source=asn_source,
            timezones=geoip.TimeZones(),
            caches=cache.new_caches(settings.cache_max_entries, clock=clock, shared=shared),
            resolver=resolver,
            shared=shared,
        )

    # Lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        if not self.databases_opened:  # python -m ipintel opened them before serving (open_databases)
            self.open_databases(index=False)
        # The ASN file's AS -> networks walk (seconds) in a thread, once the rest of the start is done.
        self.databases.start_indexes()
        await self.http.start()
        if self.shared is not None:
            await self.shared.start()  # never fails: a Redis that is down is reported, and used once it answers
        await self.resolver.start()
        self.feeds.start(refresh=self.settings.feeds_enabled)  # background: the service answers at once
        self.dnsbl_tests.start()  # background: never delays start-up nor a request

    async def close(self) -> None:
        await self.feeds.close()
        await self.dnsbl_tests.close()
        await self.resolver.close()
        await self.http.close()
        if self.shared is not None:
            await self.shared.close()
        self.databases.close()

    def open_databases(self, *, index: bool = True) -> list[str]:
        """Open every .mmdb file; the refusals, each a sentence (``python -m ipintel`` exits 2 on one).
        ``index``: build the ASN index now too (:meth:`start` does it otherwise)."""
        self.databases_opened = True
        refusals = self.databases.load(index=index)
        for db in self.databases.all():
            if db.stale():
                log.warning("%s", db.stale_warning())
        return refusals

    @property
    def ready(self) -> bool:
        return self.databases.city.ready

    def readiness(self) -> dict[str, Any]:
        """What /readyz reports: each database's state (and later, feeds')."""
        checks: dict[str, Any] = {}
        seen: dict[str, int] = {}
        for db in self.databases.all():
            # geoip_city, then geoip_city_2, ... for the further files of a kind (docs/API.md#operations).
            seen[db.kind] = seen.get(db.kind, 0) + 1
            name = f"geoip_{db.kind}" + (f"_{seen[db.kind]}" if seen[db.kind] > 1 else "")
            checks[name] = db.health()
        # Feeds are reported, but readiness does not depend on them: a verdict without them is
        # still an answer, with lower confidence.
        for name, health in self.feed_health().items():
            checks[f"feed_{name}"] = health
        # Redis neither: while it is degraded the service answers from in-process state (docs/API.md#caching).
        if self.shared is not None:
            checks["redis"] = self.shared.health()
        return checks

    def feed_health(self) -> dict[str, dict[str, Any]]:
        """Each feed: ``{"status": "ok"|"stale"|"missing"|"disabled", "ageSeconds", "prefixes"}``."""
        return self.feeds.health()

    # Capabilities ------------------------------------------------------------

    async def lookup_ip(self, ip: str) -> dict[str, Any]:
        """GeoIP record (docs/API.md#geoip) of a public address given as text."""
        address = addresses.parse_public_ip(ip)
        return await self._geoip(address, ttl=cache.GEOIP_TTL)

    async def lookup_own_ip(self, ip: str) -> dict[str, Any]:
        """GeoIP record of the caller's own address (``/ip``, ``lookup_ip`` without ``ip``).

        ``/ip`` is not cached (docs/API.md#caching): it reads an entry ``/ip/:ip`` left and
        joins a load under way, but never stores one, because callers' own
        addresses are many and each is asked about rarely; storing them would
        evict the entries that ``/ip/:ip`` callers reuse. A miss costs one
        ``.mmdb`` read."""
        address = addresses.parse_public_ip(ip)
        return await self._geoip(address, ttl=None)

    async def _geoip(self, address: addresses.IPAddress, *, ttl: float | None) -> dict[str, Any]:
        async def load() -> dict[str, Any]:
            asn_db = self.databases.asn
            return await geoip.lookup(
                address,
                city_db=self.databases.city,
                asn=self.asn_source,
                timezones=self.timezones,
                asn_in_record=asn_db is None or not asn_db.loaded,
            )

        def lifetime(record: dict[str, Any]) -> float | None:
            # A record without its AS (Team Cymru unreachable, or an address no
            # AS announces) is kept 5 minutes, so a passing DNS failure does not
            # leave the ASN fields null for a day.
            if ttl is None or record.get("asn") is not None:
                return ttl
            return min(ttl, cache.INCOMPLETE_TTL)

        return await self.caches["geoip"].get_or_load(self._geo_key("ip", address), load, ttl=lifetime)

    def _geo_key(self, namespace: str, address: addresses.IPAddress) -> tuple[str, int, int, int]:
        """Key in the GeoIP cache (``ip`` records and ``vpn`` verdicts share it, docs/API.md#caching).

        The address is the canonical one (an IPv4-mapped address is its IPv4
        address), keyed by version and value: the same entry as its text form,
        without formatting that text on every hit. The key carries the
        databases' generation, and the cache is emptied when that changes:
        after a ``.mmdb`` reload no answer from the old files is served, not
        even one whose load was under way during the reload."""
        generation = self.databases.generation
        if generation != self._geo_generation:
            self._geo_generation = generation
            self.caches["geoip"].clear()
        return (namespace, address.version, int(address), generation)

    def _peek_geo(self, namespace: str, ip: str) -> Callable[[], dict[str, Any]] | None:
        """What ``lookup_ip`` (``ip``) or ``detect_vpn`` (``vpn``) would answer from the cache for a
        canonical public address, without awaiting (:meth:`cache.Cache.peek`); ``None`` when not cached."""
        return self.caches["geoip"].peek(self._geo_key(namespace, addresses.parse_public_ip(ip)))

    async def _local_geo(self, ip: str, batch: profile.Batch) -> dict[str, Any]:
        """A batch's GeoIP record: as ``lookup_ip``, but the AS from an ASN database or Team Cymru's caches
        only, never a query. A record whose AS only a query could give is not kept (a later answer of Team
        Cymru completes it) and the profile says ``notConsulted: ["team-cymru"]``."""
        address = addresses.parse_public_ip(ip)
        key = self._geo_key("ip", address)
        cache_ = self.caches["geoip"]
        take = cache_.peek(key)
        if take is not None:
            return take()  # type: ignore[no-any-return]
        source = self.asn_source
        offline = _offline_asn(source)
        record = await geoip.lookup(
            address, city_db=self.databases.city, asn=offline or source, timezones=self.timezones
        )
        if offline is not None and offline.missed:
            batch.note(ip, _CYMRU)
            return record
        cache_.store(key, record, cache.GEOIP_TTL if record.get("asn") is not None else cache.INCOMPLETE_TTL)
        return record

    async def _local_vpn(self, ip: str, batch: profile.Batch) -> dict[str, Any]:
        """A batch's VPN verdict: the full verdict when ``detect_vpn`` left one in the cache, else one from
        the local sources alone. Each source left out is an ``unchecked:<source>`` reason, and a negative
        verdict is then ``low`` (a source that could have contradicted it was not asked)."""
        address = addresses.parse_public_ip(ip)
        cache_ = self.caches["geoip"]
        for namespace in ("vpn", "vpn-local"):
            take = cache_.peek(self._geo_key(namespace, address))
            if take is not None:
                return take()  # type: ignore[no-any-return]
        sources: list[vpn.SignalSource] = []
        skipped: list[str] = []
        offline: _CachedAsn | None = None
        for source in self.vpn_sources:
            if source.local:
                sources.append(source)
            elif isinstance(source, vpn.AsnClassSource) and (offline := _offline_asn(source.asn_source)):
                sources.append(vpn.AsnClassSource(offline, source.classes, local=True))
            else:
                skipped.append(source.name)
        verdict = await vpn.detect_vpn(address, sources)
        if offline is not None and offline.missed:
            skipped.append(_CYMRU)
        if skipped:
            verdict = {
                **verdict,
                "reasons": [*verdict["reasons"], *(profile.UNCHECKED + name for name in skipped)],
                "confidence": verdict["confidence"] if verdict["isVpn"] else "low",
            }
        if offline is None or not offline.missed:  # complete as local verdicts go: kept like detect_vpn's
            cache_.store(self._geo_key("vpn-local", address), verdict, self._vpn_ttl(verdict))
        return verdict

    def _peek_local_vpn(self, ip: str) -> Callable[[], dict[str, Any]] | None:
        address = addresses.parse_public_ip(ip)
        cache_ = self.caches["geoip"]
        return cache_.peek(self._geo_key("vpn", address)) or cache_.peek(self._geo_key("vpn-local", address))

    async def whois_ip(self, ip: str, *, registries: RegistryGate | None = None) -> dict[str, Any]:
        """Registry record (docs/API.md#registry-rdap) of a public address, from its registry's RDAP service.

        ``registries`` is a batch's gate on the registries (docs/API.md#profile-and-batch)."""
        address = addresses.parse_public_ip(ip)
        return await self.caches["whois"].get_or_load(
            str(address),
            lambda: whois.lookup(address, http=self.http, bootstrap=self.rdap_bootstrap, registries=registries),
            ttl=cache.WHOIS_TTL,  # 7 days; an RDAP 404 5 minutes
            error_ttl=cache.negative_error_ttl,
        )

    async def lookup_asn(self, asn: str) -> dict[str, Any]:
        """AS record (docs/API.md#as-record) of an AS number given as text (``AS13335`` or ``13335``).

        The registry part is cached like /whois (7 days; an RDAP 404 5 minutes). ``prefixes`` are read
        from the ASN database's index on every call, so a reload shows at once and is never cached."""
        number = addresses.parse_asn(asn)
        record = await self.caches["whois"].get_or_load(
            ("asn", number),
            lambda: whois.lookup_autnum(number, http=self.http, bootstrap=self.rdap_bootstrap),
            ttl=cache.WHOIS_TTL,
            error_ttl=cache.negative_error_ttl,
        )
        return {**record, "prefixes": await self.asn_prefixes(number)}

    async def asn_prefixes(self, number: int) -> list[str] | None:
        """The networks the ASN database lists for AS ``number``; ``None`` without an indexed ASN database
        (none configured, not loaded, too large to index, or its index not built within
        :data:`INDEX_WAIT` seconds of the request, just after a start or reload): unknown, never "none"."""
        asn_db = self.databases.asn
        index = await asn_db.wait_index(INDEX_WAIT) if asn_db is not None else None
        return index.prefixes(number) if isinstance(index, AsnPrefixes) else None

    async def lookup_dns(self, domain: str, type: str | None = "A") -> dict[str, Any]:
        """DNS records (docs/API.md#dns) of a domain given as text; ``type`` in any case, default A."""
        name = addresses.parse_domain(domain)
        rdtype = dns.parse_record_type(type)
        return await self.caches["dns"].get_or_load(
            ("dns", name, rdtype),
            lambda: dns.lookup(name, rdtype, resolver=self.resolver),
            ttl=cache.dns_ttl,  # 5 minutes, never past the records' own TTL; NXDOMAIN 5 minutes
            error_ttl=cache.negative_error_ttl,
        )

    async def reverse_dns(self, ip: str) -> dict[str, Any]:
        """PTR records (docs/API.md#dns) of any address given as text (no reserved-range check)."""
        address = addresses.parse_ip(ip)
        return await self.caches["dns"].get_or_load(
            ("ptr", str(address)),
            lambda: dns.reverse(address, resolver=self.resolver),
            ttl=cache.dns_ttl,
            error_ttl=cache.negative_error_ttl,
        )

    async def check_blacklist(self, ip: str) -> dict[str, Any]:
        """Blacklist record (docs/API.md#blacklist) of a public IPv4 address given as text.

        Cached 1 h only when definitive (no source ``unavailable``, docs/API.md#caching;
        the rule of ``blacklist.is_definitive``)."""
        address = blacklist.public_ipv4(ip)
        return await self.caches["blacklist"].get_or_load(
            str(address),
            lambda: blacklist.check(
                address,
                zones=self.dnsbl_zones,
                resolver=self.resolver,
                tests=self.dnsbl_tests,
                reputation=self.reputation,
                reputation_name=self.reputation.name,
                deadline=self.settings.blacklist_deadline,
                dns_timeout=self.settings.dns_timeout,
            ),
            ttl=cache.blacklist_ttl,  # 1 hour when definitive, else not at all
        )

    async def detect_vpn(self, ip: str) -> dict[str, Any]:
        """VPN/proxy/Tor/hosting/mobile verdict (docs/API.md#vpn-detection) of a public address."""
        address = addresses.parse_public_ip(ip)
        return await self.caches["geoip"].get_or_load(
            self._geo_key("vpn", address),
            lambda: vpn.detect_vpn(address, self.vpn_sources),
            ttl=self._vpn_ttl,
        )

    def _vpn_ttl(self, verdict: dict[str, Any]) -> float:
        """24 h (docs/API.md#caching), but only 5 minutes while a feed is missing or stale (just
        after a first start, say): a verdict made without them should not outlive them."""
        return cache.GEOIP_TTL if self.feeds.complete() else cache.INCOMPLETE_TTL

    async def profile_ip(
        self, ip: str, include: Iterable[object] | None = None, *, spend: Spend = spend_nothing
    ) -> dict[str, Any]:
        """Everything about one public address (docs/API.md#profile-and-batch): the parts in ``include``
        (default all), each what its own method answers or the error it met. A malformed or non-public
        address fails the whole call, as ``lookup_ip`` does. ``spend`` takes a part's per-address token."""
        address = addresses.parse_public_ip(ip)
        parts = self._profile_parts(include, profile.PART_NAMES)
        return await profile.profile(str(address), parts, profile.Batch(spend=spend))

    async def lookup_ips(
        self,
        ips: Sequence[str],
        include: Iterable[object] | None = None,
        *,
        spend: Spend = spend_nothing,
    ) -> dict[str, Any]:
        """The profiles of many addresses, in order, each entry ``{"ip", "data"}`` or ``{"ip", "error"}``
        (docs/API.md#profile-and-batch); at most ``IPINTEL_BATCH_MAX`` addresses, ``include`` default geo and vpn."""
        if len(ips) > self.settings.batch_max:
            raise ApiError(
                "invalid_request",
                f"a batch holds at most {self.settings.batch_max} addresses (IPINTEL_BATCH_MAX), this one has "
                f"{len(ips)}: split it into several requests",
            )
        parts = self._profile_parts(include, profile.BATCH_DEFAULT, self._batch_parts)
        results = await profile.profiles(ips, parts, profile.Batch(spend=spend), canonical=_canonical_public)
        return {"results": results}

    def _profile_parts(
        self, include: Iterable[object] | None, default: Sequence[str], parts: dict[str, profile.Part] | None = None
    ) -> list[profile.Part]:
        chosen = profile.parse_include(include, default)
        return [(parts or self._parts)[name] for name in chosen]

    async def calculate_cidr(self, range_: str) -> dict[str, Any]:
        """CIDR arithmetic (docs/API.md#cidr); never cached, it is cheaper than a cache lookup."""
        return cidr.calculate(range_)


def _secret(path: Path | None) -> str | None:
    """The first line of a secret file (IPINTEL_REDIS_PASSWORD_FILE); a ConfigError (exit 2) when unreadable."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"IPINTEL_REDIS_PASSWORD_FILE {path}: cannot be read ({type(exc).__name__})") from None
    return text.splitlines()[0] if text.strip() else ""


_CYMRU = "team-cymru"  # the source a local AS lookup left out (notConsulted, unchecked:team-cymru)


class _CachedAsn:
    """An :class:`AsnSource` answering from Team Cymru's caches alone (a batch's local parts); ``missed``:
    whether it met an address only a query could answer."""

    __slots__ = ("missed", "source")

    def __init__(self, source: CymruAsnSource) -> None:
        self.source = source
        self.missed = False

    async def lookup(self, ip: addresses.IPAddress) -> AsnInfo | None:
        known, info = self.source.cached(ip)
        if not known:
            self.missed = True
        return info


def _offline_asn(source: AsnSource) -> _CachedAsn | None:
    """What a batch's local parts ask instead of ``source`` when it would query Team Cymru: Team Cymru itself,
    or an ASN database that is not loaded yet and falls back to it. ``None``: ``source`` answers locally."""
    if isinstance(source, MmdbAsnSource) and not source.db.loaded:
        source = source.fallback  # type: ignore[assignment]
    return _CachedAsn(source) if isinstance(source, CymruAsnSource) else None


def _canonical_public(text: str) -> str:
    """An address of a batch, canonical and public, or its ``ApiError`` (the entry's own error)."""
    return str(addresses.parse_public_ip(text))
