"""The capabilities bound to their infrastructure: what REST routes and MCP tools call.

:class:`Intel` is the single place where client text is parsed into
canonical input, caches are consulted, and a capability function is run with
the infrastructure it needs (databases, resolver, HTTP client). The REST
routes (``ipintel.api``) and the MCP tools (``ipintel.api.mcp``) are thin
adapters over its methods, so both share one behaviour and one set of caches.
"""

from __future__ import annotations

import logging
from typing import Any

from ipintel import addresses
from ipintel.capabilities import cidr, geoip
from ipintel.capabilities.asn import AsnSource, MmdbAsnSource, NoAsnSource
from ipintel.infra.mmdb import GeoDatabases
from ipintel.infra.stats import UpstreamStats
from ipintel.infra.upstream import HttpClient
from ipintel.settings import Settings

log = logging.getLogger("ipintel.service")


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
    ) -> None:
        self.settings = settings
        self.databases = databases
        self.http = http
        self.asn_source = asn_source
        self.timezones = timezones
        self.upstream_stats = http.stats

    @classmethod
    def from_settings(cls, settings: Settings) -> Intel:
        databases = GeoDatabases(
            settings.city_db_path,
            asn=settings.geoip_asn_db,
            anonymous=settings.geoip_anonymous_db,
            connection=settings.geoip_connection_db,
        )
        asn_source: AsnSource = MmdbAsnSource(databases.asn) if databases.asn else NoAsnSource()
        # One statistics object for every upstream client (HTTP and DNS): /metrics reads it.
        stats = UpstreamStats()
        return cls(
            settings,
            databases=databases,
            http=HttpClient(timeout=settings.upstream_timeout, stats=stats),
            asn_source=asn_source,
            timezones=geoip.TimeZones(),
        )

    # Lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self.databases.load()
        await self.http.start()

    async def close(self) -> None:
        await self.http.close()
        self.databases.close()

    @property
    def ready(self) -> bool:
        return self.databases.city.loaded

    def readiness(self) -> dict[str, Any]:
        """What /readyz reports: each database's state (and later, feeds')."""
        checks: dict[str, Any] = {}
        for db in self.databases.all():
            checks[f"geoip_{db.kind}"] = {
                "status": "ok" if db.loaded else "unavailable",
                "path": str(db.path),
                "buildEpoch": db.build_epoch,
                **({"error": db.last_error} if db.last_error else {}),
            }
        return checks

    # Capabilities ------------------------------------------------------------

    async def lookup_ip(self, ip: str) -> dict[str, Any]:
        """GeoIP record (SPEC 3.1) of a public address given as text."""
        address = addresses.parse_public_ip(ip)
        return await geoip.lookup(address, city_db=self.databases.city, asn=self.asn_source, timezones=self.timezones)

    async def calculate_cidr(self, range_: str) -> dict[str, Any]:
        """CIDR arithmetic (SPEC 3.6); never cached, it is cheaper than a cache lookup."""
        return cidr.calculate(range_)
