"""ASN data from Team Cymru's IP-to-ASN DNS interface, when no ASN ``.mmdb`` is configured.

Two TXT lookups through the shared resolver (https://www.team-cymru.com/ip-asn-mapping):

- ``<reversed address>.origin.<zone>`` (``origin6`` with nibbles for IPv6)
  gives the announcing AS and the announced prefix:
  ``"15169 | 8.8.8.0/24 | US | arin | 2023-12-28"``. An address covered by
  several announcements has several records (or several ASNs in one): the
  most specific prefix wins, then the first ASN listed.
- ``AS<n>.<zone>`` gives the AS's name:
  ``"15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US"``; the
  organisation is the part after the handle, without the country suffix
  (``Google LLC``).

Answers are cached 24 h (docs/API.md#caching) in bounded TTL caches held by the
source: origins per announced prefix (every address of 8.8.8.0/24 is then
answered without a query), names per ASN, and "not announced" per address.
Failures are not cached, and never raised: an ASN is a garnish on the GeoIP
record, whose fields then stay null.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import TTLCache

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnInfo
from ipintel.infra.resolver import NxDomain, Resolver, ResolverError

log = logging.getLogger("ipintel.cymru")

DAY = 24 * 60 * 60.0
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# ", US" at the end of an AS name: the registry's country, not part of the name.
_COUNTRY_SUFFIX = re.compile(r",\s*[A-Z]{2}\Z")
# "GOOGLE - Google LLC": the handle, then the organisation.
_HANDLE_SEPARATOR = re.compile(r"\s+-(?:\s+|\Z)")


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
    """The most specific announcement covering ``ip`` among origin TXT strings."""
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
    """The AS's name field (the 5th) from ``AS<n>`` TXT strings, for this ASN."""
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
    ) -> None:
        self.resolver = resolver
        self.zone = zone.lower().rstrip(".")
        self.timeout = timeout
        self._origins: TTLCache[IPNetwork, int] = TTLCache(max_entries, ttl, timer=clock)
        self._unannounced: TTLCache[IPAddress, bool] = TTLCache(max_entries, ttl, timer=clock)
        self._names: TTLCache[int, str | None] = TTLCache(max_entries, ttl, timer=clock)
        # Prefix lengths held in _origins (at most 129 values), so a lookup
        # probes only the lengths that can match.
        self._lengths: set[tuple[int, int]] = set()

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
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
        try:
            records = await self.resolver.query(origin_name(ip, self.zone), "TXT", timeout=self.timeout, source="cymru")
        except NxDomain:
            self._unannounced[ip] = True
            return None
        origin = parse_origin([r.data for r in records if r.type == "TXT"], ip)
        if origin is None:
            self._unannounced[ip] = True
            return None
        self._origins[origin.prefix] = origin.asn
        self._lengths.add((origin.prefix.version, origin.prefix.prefixlen))
        return origin.asn

    def _cached_origin(self, ip: IPAddress) -> int | None:
        for version, length in sorted(self._lengths, key=lambda vl: -vl[1]):
            if version != ip.version:
                continue
            asn = self._origins.get(ipaddress.ip_network((ip, length), strict=False))
            if asn is not None:
                return asn
        return None

    async def _name(self, asn: int) -> str | None:
        if asn in self._names:
            return self._names[asn]
        try:
            records = await self.resolver.query(f"AS{asn}.{self.zone}", "TXT", timeout=self.timeout, source="cymru")
        except NxDomain:
            records = []
        name = parse_as_name([r.data for r in records if r.type == "TXT"], asn)
        self._names[asn] = name
        return name
