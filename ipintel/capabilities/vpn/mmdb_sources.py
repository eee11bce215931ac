"""MaxMind's paid databases as signal sources: Anonymous-IP and Connection-Type.

Both are optional (``IPINTEL_GEOIP_ANONYMOUS_DB``, ``IPINTEL_GEOIP_CONNECTION_DB``)
and opened by :class:`~ipintel.infra.mmdb.GeoDatabases`. A configured file that
failed to load makes the source incomplete, which lowers a negative verdict's
confidence; an unconfigured one is simply not a source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import maxminddb

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength
from ipintel.infra.mmdb import MmdbFile, MmdbSet

# GeoIP2 Anonymous-IP fields -> what they are evidence of. ``is_anonymous`` is
# MaxMind's umbrella flag (true when any of these is) and adds nothing.
ANONYMOUS_FIELDS: tuple[tuple[str, Kind, str], ...] = (
    ("is_tor_exit_node", Kind.TOR, "anonymous-db:tor-exit"),
    ("is_anonymous_vpn", Kind.VPN, "anonymous-db:vpn"),
    ("is_public_proxy", Kind.PROXY, "anonymous-db:public-proxy"),
    ("is_residential_proxy", Kind.PROXY, "anonymous-db:residential-proxy"),
    ("is_hosting_provider", Kind.HOSTING, "anonymous-db:hosting"),
)


class _DatabaseSource:
    """A signal source reading one optional ``.mmdb`` file (``None``: not configured)."""

    local = True

    def __init__(self, db: MmdbSet | MmdbFile | None) -> None:
        self.db = db

    def record(self, ip: IPAddress) -> dict[str, Any] | None:
        """The file's record for ``ip``; ``None`` when there is none or the file cannot answer."""
        db = self.db
        if db is None or not db.loaded:
            return None
        try:
            record, _ = db.lookup(ip)
        except (LookupError, maxminddb.InvalidDatabaseError):  # closed or replaced under us; a corrupt file
            return None
        return record

    def complete(self) -> bool:
        return self.db is None or self.db.loaded


class AnonymousIpSource(_DatabaseSource):
    """GeoIP2 Anonymous-IP: MaxMind's list of VPN, proxy, Tor and hosting
    addresses - a primary list, so its anonymising flags are exact evidence."""

    name = "anonymous-db"

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        record = self.record(ip)
        if not record:
            return ()
        return [
            Signal(kind, Strength.EXACT, reason)
            for field, kind, reason in ANONYMOUS_FIELDS
            if record.get(field) is True
        ]


class ConnectionTypeSource(_DatabaseSource):
    """GeoIP2 Connection-Type: ``Cellular`` is the one value that is evidence
    (of a mobile network); ``Cable/DSL``, ``Corporate``, ``Satellite`` are not
    signals this answer has a flag for."""

    name = "connection-db"

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        record = self.record(ip)
        if record and record.get("connection_type") == "Cellular":
            return (Signal(Kind.MOBILE, Strength.NETWORK, "connection-type:cellular"),)
        return ()
