"""ASN data from Team Cymru's IP-to-ASN DNS interface (https://www.team-cymru.com/ip-asn-mapping), when no ASN
``.mmdb`` is configured (docs/API.md#geoip).

Two TXT lookups through the shared resolver, an address's origin and its AS's name, cached 24 h in process and,
with a shared store, in Redis too (docs/API.md#caching, docs/API.md#shared-state).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from cachetools import TLRUCache

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnInfo
from ipintel.infra.resolver import NxDomain, Resolver, ResolverError
from ipintel.infra.shared import PREFIX, SharedStore, SharedUnavailable

log = logging.getLogger("ipintel.cymru")

DAY = 24 * 60 * 60.0
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# ", US" at the end of an AS name: the registry's country, not part of the name.
_COUNTRY_SUFFIX = re.compile(r",\s*[A-Z]{2}\Z")
# "GOOGLE - Google LLC": the handle, then the organisation.
_HANDLE_SEPARATOR = re.compile(r"\s+-(?:\s+|\Z)")

# The prefix lengths asked of the shared store for an address: those a global announcement can have
# (longer ones are filtered in BGP). A longer one is still cached, in process.
_SHARED_LENGTHS = {4: range(32, 7, -1), 6: range(64, 15, -1)}
_SHARED = f"{PREFIX}cymru:"  # without a namespace; CymruAsnSource uses its store's prefix


def _expiry(key: Any, entry: tuple[Any, float], now: float) -> float:
    return entry[1]


class _Expiring(TLRUCache[Any, tuple[Any, float]]):
    """A bounded cache of ``(value, monotonic expiry)``: an entry read from the shared store keeps the
    lifetime it has left there."""

    def __init__(self, maxsize: int, timer: Callable[[], float]) -> None:
        super().__init__(maxsize, _expiry, timer=timer)


@dataclass(frozen=True)
class Origin:
    asn: int
    prefix: IPNetwork


def origin_name(ip: IPAddress, zone: str) -> str:
    """``8.8.8.8`` -> ``8.8.8.8.origin.<zone>`` reversed; IPv6 as nibbles under ``origin6``."""
    if ip.version == 4:
        return ".".join(reversed(str(ip).split("."))) + f".origin.{zone}"
    nibbles = ip.exploded.replace(":", "")
    return ".".join(reversed(nibbles)) + f".origin6.{zone}"


def parse_origin(texts: list[str], ip: IPAddress) -> Origin | None:
    """The most specific announcement covering ``ip`` among origin TXT strings
    (``"15169 | 8.8.8.0/24 | US | arin | 2023-12-28"``), with the first ASN it lists."""
    # An address covered by several announcements has several records, or several ASNs in one.
    best: Origin | None = None
    for text in texts:
        fields = [f.strip() for f in text.split("|")]
        if len(fields) < 2:
            continue
        numbers = [int(n) for n in fields[0].split() if n.isascii() and n.isdigit() and 0 < int(n) < 2**32]
        try:
            prefix = ipaddress.ip_network(fields[1], strict=False)
        except ValueError:
            continue
        if not numbers or prefix.version != ip.version or ip not in prefix:
            continue
        if best is None or prefix.prefixlen > best.prefix.prefixlen:
            best = Origin(numbers[0], prefix)
    return best


def parse_as_name(texts: list[str], asn: int) -> str | None:
    """The AS's name field (the 5th) from ``AS<n>`` TXT strings, for this ASN
    (``"15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US"``)."""
    for text in texts:
        fields = [f.strip() for f in text.split("|", 4)]  # the name itself may hold a "|"
        if len(fields) == 5 and fields[0] == str(asn):
            return fields[4] or None
    return None


def organisation(as_name: str | None) -> str | None:
    """``GOOGLE - Google LLC, US`` -> ``Google LLC``.

    Cymru writes ``<handle> - <organisation>, <CC>``; older or short entries
    are just ``<handle>, <CC>`` (``LEVEL3, US``), where the handle is the
    only name there is. Reserved and private-use numbers carry placeholders
    like ``-Reserved AS-, ZZ``, which name nobody."""
    if not as_name:
        return None
    name = _COUNTRY_SUFFIX.sub("", as_name.strip()).strip()
    handle, *rest = _HANDLE_SEPARATOR.split(name, maxsplit=1)
    name = rest[0].strip() if rest and rest[0].strip() else handle.strip()
    if not name or (name.startswith("-") and name.endswith("-")):
        return None
    return name


class CymruAsnSource:
    """:class:`~ipintel.capabilities.asn.AsnSource` over Team Cymru's DNS zone."""

    def __init__(
        self,
        resolver: Resolver,
        zone: str = "asn.cymru.com",
        *,
        ttl: float = DAY,
        max_entries: int = 10_000,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedStore | None = None,
    ) -> None:
        self.resolver = resolver
        self.zone = zone.lower().rstrip(".")
        self.timeout = timeout
        self.ttl = ttl
        self.clock = clock
        self.shared = shared
        self._shared_prefix = f"{shared.prefix}cymru:" if shared is not None else _SHARED
        self._origins = _Expiring(max_entries, clock)  # prefix -> (ASN, expiry)
        self._unannounced = _Expiring(max_entries, clock)  # address -> (True, expiry)
        self._names = _Expiring(max_entries, clock)  # ASN -> (name or None, expiry)
        # Prefix lengths held in _origins (at most 129 values), so a lookup
        # probes only the lengths that can match.
        self._lengths: set[tuple[int, int]] = set()
        # Single flight (issue 23): the lookups under way, by address, so that the GeoIP record and the VPN
        # verdict of one address (a profile asks both at once) share one origin and one name query.
        self._inflight: dict[IPAddress, asyncio.Future[AsnInfo | None]] = {}

    def cached(self, ip: IPAddress) -> tuple[bool, AsnInfo | None]:
        """What the in-process caches know, asking nobody: ``(True, info)`` when they answer (``info``
        ``None``: not announced), ``(False, None)`` when only a query could tell."""
        asn = self._cached_origin(ip)
        if asn is None:
            return (True, None) if ip in self._unannounced else (False, None)
        entry = self._names.get(asn)
        if entry is None:
            return False, None
        return True, AsnInfo(asn, organisation(entry[0]))

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        known, info = self.cached(ip)
        if known:
            return info
        flight = self._inflight.get(ip)
        if flight is None:
            flight = asyncio.ensure_future(self._lookup(ip))
            self._inflight[ip] = flight
            flight.add_done_callback(lambda _: self._inflight.pop(ip, None))
        # shield: a caller that goes away does not cancel the lookup another caller shares.
        return await asyncio.shield(flight)

    async def _lookup(self, ip: IPAddress) -> AsnInfo | None:
        try:
            asn = await self._origin_asn(ip)
        except ResolverError as exc:
            log.debug("Team Cymru origin lookup for %s failed: %s", ip, exc)  # DEBUG: the address is a client's lookup
            return None
        except Exception:  # an ASN is a garnish: never fail the GeoIP answer for it
            log.exception("Team Cymru origin lookup for %s failed unexpectedly", ip)
            return None
        if asn is None:
            return None
        try:
            name = await self._name(asn)
        except ResolverError as exc:  # the number alone is still worth giving
            log.debug("Team Cymru name lookup for AS%d failed: %s", asn, exc)
            name = None
        except Exception:
            log.exception("Team Cymru name lookup for AS%d failed unexpectedly", asn)
            name = None
        return AsnInfo(asn, organisation(name))

    async def _origin_asn(self, ip: IPAddress) -> int | None:
        cached = self._cached_origin(ip)
        if cached is not None:
            return cached
        if ip in self._unannounced:
            return None
        if self.shared is not None:
            known, asn = await self._shared_origin(ip, self.shared)
            if known:
                return asn
        try:
            records = await self.resolver.query(origin_name(ip, self.zone), "TXT", timeout=self.timeout, source="cymru")
        except NxDomain:
            await self._remember_unannounced(ip)
            return None
        origin = parse_origin([r.data for r in records if r.type == "TXT"], ip)
        if origin is None:
            await self._remember_unannounced(ip)
            return None
        self._remember_origin(origin.prefix, origin.asn, self.ttl)
        await self._share([(f"{self._shared_prefix}origin:{origin.prefix}", origin.asn)])
        return origin.asn

    def _remember_origin(self, prefix: IPNetwork, asn: int, seconds: float) -> None:
        self._origins[prefix] = (asn, self.clock() + seconds)
        self._lengths.add((prefix.version, prefix.prefixlen))

    async def _remember_unannounced(self, ip: IPAddress) -> None:
        self._unannounced[ip] = (True, self.clock() + self.ttl)
        await self._share([(f"{self._shared_prefix}unannounced:{ip}", True)])

    def _cached_origin(self, ip: IPAddress) -> int | None:
        for version, length in sorted(self._lengths, key=lambda vl: -vl[1]):
            if version != ip.version:
                continue
            entry = self._origins.get(ipaddress.ip_network((ip, length), strict=False))
            if entry is not None:
                asn: int = entry[0]
                return asn
        return None

    async def _shared_origin(self, ip: IPAddress, shared: SharedStore) -> tuple[bool, int | None]:
        """``(True, asn)`` for a covering announcement in the shared store (the most specific), ``(True,
        None)`` when it says "not announced", ``(False, None)`` when it knows nothing (or is unavailable)."""
        # One MGET: every covering prefix an announcement can have, and the address's "not announced" mark.
        prefixes = [ipaddress.ip_network((ip, length), strict=False) for length in _SHARED_LENGTHS[ip.version]]
        shared_prefix = self._shared_prefix
        keys = [f"{shared_prefix}unannounced:{ip}", *(f"{shared_prefix}origin:{prefix}" for prefix in prefixes)]
        try:
            values = await shared.mget(keys)
        except SharedUnavailable:
            return False, None
        unannounced, *origins = (_shared_value(v) for v in values)
        for prefix, found in zip(prefixes, origins, strict=True):  # longest first
            if found is not None and isinstance(found[0], int):
                self._remember_origin(prefix, found[0], found[1])
                return True, found[0]
        if unannounced is not None:
            self._unannounced[ip] = (True, self.clock() + unannounced[1])
            return True, None
        return False, None

    async def _name(self, asn: int) -> str | None:
        entry = self._names.get(asn)
        if entry is not None:
            cached: str | None = entry[0]
            return cached
        key = f"{self._shared_prefix}name:{asn}"
        if self.shared is not None:
            try:
                (value,) = await self.shared.mget([key])
            except SharedUnavailable:
                value = None
            found = _shared_value(value)
            if found is not None and (found[0] is None or isinstance(found[0], str)):
                self._names[asn] = (found[0], self.clock() + found[1])
                return found[0]
        try:
            records = await self.resolver.query(f"AS{asn}.{self.zone}", "TXT", timeout=self.timeout, source="cymru")
        except NxDomain:
            records = []
        name = parse_as_name([r.data for r in records if r.type == "TXT"], asn)
        self._names[asn] = (name, self.clock() + self.ttl)
        await self._share([(key, name)])
        return name

    async def _share(self, items: list[tuple[str, object]]) -> None:
        """Store answers in the shared store for their whole lifetime, with their expiry in wall-clock time
        (read back by :func:`_shared_value`); a failure leaves them in process only."""
        if self.shared is None:
            return
        expires = time.time() + self.ttl
        try:
            await self.shared.set_many([(key, orjson.dumps([value, expires]), self.ttl) for key, value in items])
        except SharedUnavailable:
            pass


def _shared_value(raw: bytes | None) -> tuple[Any, float] | None:
    """A value of the shared store and the seconds it has left; ``None`` when missing, expired or unreadable."""
    if raw is None:
        return None
    try:
        value, expires = orjson.loads(raw)
        left = float(expires) - time.time()
    except (ValueError, TypeError):
        return None
    return (value, left) if left > 0 else None
