"""Autonomous-system data for an address: the seam GeoIP and VPN detection share.

Two sources answer the same question: an ASN ``.mmdb`` (GeoLite2-ASN, DB-IP
ASN Lite, IPinfo Lite) when one is configured, otherwise Team Cymru's DNS
interface (``ipintel.capabilities.cymru``). Callers see only :class:`AsnSource`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ipintel.addresses import IPAddress
from ipintel.infra.mmdb import MmdbFile


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
