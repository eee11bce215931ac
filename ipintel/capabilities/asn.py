"""Autonomous-system data for an address: the seam GeoIP and VPN detection share.

:class:`AsnSource` answers an address's AS from an ASN ``.mmdb``, else Team Cymru's DNS interface
(:mod:`ipintel.capabilities.cymru`); :class:`AsnPrefixes` is the other way round, AS -> networks, for
``GET /asn/:asn`` (docs/API.md#as-record).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Protocol

import maxminddb

from ipintel.addresses import IPAddress
from ipintel.capabilities.layouts import AsnInfo, asn_from_record
from ipintel.infra.memo import BoundedMemo
from ipintel.infra.mmdb import MmdbFile, MmdbSet

__all__ = ["AsnInfo", "AsnPrefixes", "AsnSource", "MmdbAsnSource", "asn_from_record"]

log = logging.getLogger("ipintel.asn")


class AsnSource(Protocol):
    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        """The AS announcing ``ip``, or ``None`` when unknown. Never raises for
        an upstream failure: an ASN is a garnish on other answers."""
        ...


class MmdbAsnSource:
    """ASN ``.mmdb`` files in any layout ipintel reads (ipintel/capabilities/layouts.py: GeoLite2-ASN,
    DB-IP ASN Lite, ip-location-db, IPinfo Lite). While none is loaded (the default file not fetched
    yet) ``fallback`` answers, Team Cymru's DNS; once one is, a miss in it is final."""

    def __init__(self, db: MmdbSet | MmdbFile, fallback: AsnSource | None = None) -> None:
        self.db = db
        self.fallback = fallback

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        if not self.db.loaded:
            return await self.fallback.lookup(ip) if self.fallback is not None else None
        record, _ = self.db.lookup(ip)
        return asn_from_record(record) if record else None


# A GeoLite2-ASN file lists about 500,000 networks; past this many the file is not an ASN database we can
# index in bounded memory, and an index that stopped part way would under-report: no index at all then.
MAX_INDEXED_NETWORKS = 5_000_000


class AsnPrefixes:
    """AS number -> the networks an ASN ``.mmdb`` lists for it (docs/API.md#as-record).

    Built once per (re)load of the file (:meth:`build`, the file's indexer) by
    walking every network of the file. Memory stays near the file's own size:
    each network is packed into 5 bytes (IPv4: address and prefix length) or
    17 (IPv6) of one ``bytes`` object per AS and family, about 4 MB for
    GeoLite2-ASN, and the build stops at :data:`MAX_INDEXED_NETWORKS`."""

    def __init__(self, v4: dict[int, bytes], v6: dict[int, bytes], networks: int) -> None:
        self._v4 = v4
        self._v6 = v6
        self.networks = networks
        # Formatting is about 4 µs a network, so a large AS's list (thousands) is kept once written.
        self._written: BoundedMemo[int, tuple[str, ...]] = BoundedMemo(256)

    @classmethod
    def build(cls, reader: maxminddb.Reader) -> AsnPrefixes | None:
        """The index of an opened ASN database; ``None`` for a file too large to index."""
        v4: dict[int, bytearray] = {}
        v6: dict[int, bytearray] = {}
        count = 0
        for network, record in reader:
            count += 1
            if count > MAX_INDEXED_NETWORKS:
                log.warning("the ASN database lists over %d networks: not indexed, prefixes are null", count - 1)
                return None
            if not isinstance(record, dict):
                continue
            info = asn_from_record(record)
            if info is None:
                continue
            if network.version == 4:
                v4.setdefault(info.number, bytearray()).extend(network.network_address.packed)
                v4[info.number].append(network.prefixlen)
            else:
                v6.setdefault(info.number, bytearray()).extend(network.network_address.packed)
                v6[info.number].append(network.prefixlen)
        return cls({n: bytes(b) for n, b in v4.items()}, {n: bytes(b) for n, b in v6.items()}, count)

    def prefixes(self, number: int) -> list[str]:
        """The networks of AS ``number``, IPv4 then IPv6, each in the file's (address) order; ``[]`` when the
        file lists none for it."""
        written = self._written.get(number)
        if written is None:
            written = self._written[number] = tuple(self._write(number))
        return list(written)

    def _write(self, number: int) -> list[str]:
        found: list[str] = []
        packed = self._v4.get(number, b"")
        for start in range(0, len(packed), 5):
            found.append(f"{ipaddress.IPv4Address(packed[start : start + 4])}/{packed[start + 4]}")
        packed = self._v6.get(number, b"")
        for start in range(0, len(packed), 17):
            found.append(f"{ipaddress.IPv6Address(packed[start : start + 16])}/{packed[start + 16]}")
        return found
