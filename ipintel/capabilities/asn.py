"""Autonomous-system data for an address: the seam GeoIP and VPN detection share.

Two sources answer the same question: an ASN ``.mmdb`` (GeoLite2-ASN, DB-IP
ASN Lite, IPinfo Lite) when one is configured, otherwise Team Cymru's DNS
interface (``ipintel.capabilities.cymru``). Callers see only :class:`AsnSource`.

The other way round, AS -> networks (``prefixes`` of ``GET /asn/:asn``,
docs/API.md#as-record), needs the whole file: :class:`AsnPrefixes` walks an
ASN ``.mmdb`` once when it loads or reloads.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import maxminddb

from ipintel.addresses import IPAddress
from ipintel.infra.memo import BoundedMemo
from ipintel.infra.mmdb import MmdbFile

log = logging.getLogger("ipintel.asn")


@dataclass(frozen=True)
class AsnInfo:
    number: int
    org: str | None

    @property
    def asn(self) -> str:
        return f"AS{self.number}"


class AsnSource(Protocol):
    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        """The AS announcing ``ip``, or ``None`` when unknown. Never raises for
        an upstream failure: an ASN is a garnish on other answers."""
        ...


class MmdbAsnSource:
    """ASN ``.mmdb`` files: GeoLite2-ASN and DB-IP ASN Lite use
    ``autonomous_system_number``/``autonomous_system_organization``; IPinfo's
    files use ``asn`` (``"AS15169"``) and ``as_name``."""

    def __init__(self, db: MmdbFile) -> None:
        self.db = db

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        if not self.db.loaded:
            return None
        record, _ = self.db.lookup(ip)
        return asn_from_record(record) if record else None


def asn_from_record(record: dict[str, Any]) -> AsnInfo | None:
    number = record.get("autonomous_system_number")
    org = record.get("autonomous_system_organization")
    if number is None and isinstance(record.get("asn"), str):
        text = record["asn"].upper().removeprefix("AS")
        number = int(text) if text.isdigit() else None
        org = record.get("as_name") or record.get("name")
    if not isinstance(number, int) or number <= 0:
        return None
    return AsnInfo(number, org if isinstance(org, str) and org.strip() else None)


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
