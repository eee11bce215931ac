"""GeoIP (docs/API.md#geoip): where an address is, and which network announces it.

City data comes from a City (or Country) ``.mmdb`` in any layout
``layouts.py`` reads; the time zone from the record or,
when the database has none (DB-IP Lite), from the coordinates; ASN fields
from an :class:`~ipintel.capabilities.asn.AsnSource`, whose failure leaves
them null and never fails the lookup.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import Any, cast

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnSource
from ipintel.capabilities.layouts import asn_from_record, geo_fields
from ipintel.errors import ApiError
from ipintel.infra.mmdb import MmdbFile, MmdbSet


class TimeZones:
    """IANA time zone of a coordinate, from the time-zone polygons of
    timezonefinder. Loaded on first use (about 0.2 s) rather than at start."""

    def __init__(self) -> None:
        self._finder: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        if self._finder is None:
            with self._lock:
                if self._finder is None:
                    from timezonefinder import TimezoneFinder

                    self._finder = TimezoneFinder()
        return self._finder

    def at(self, latitude: float | None, longitude: float | None) -> str | None:
        if latitude is None or longitude is None:
            return None
        if not (-90 <= latitude <= 90 and -180 <= longitude <= 180):
            return None
        return cast("str | None", self._get().timezone_at(lng=longitude, lat=latitude))


async def lookup(
    ip: IPAddress,
    *,
    city_db: MmdbSet | MmdbFile,
    asn: AsnSource,
    timezones: TimeZones,
    asn_in_record: bool = False,
) -> dict[str, Any]:
    """The GeoIP record of a public address (the caller has checked it is public), from a City or Country
    database in any layout of ipintel/capabilities/layouts.py. ``asn_in_record``: the City record's own AS
    fields (IPinfo Lite) are used before ``asn`` is asked (no AS database is configured)."""
    if not city_db.loaded:
        raise ApiError("geoip_unavailable", "no GeoIP database is loaded")
    record, prefix_len = city_db.lookup(ip)
    if not record:
        raise ApiError("address_not_found", f"the GeoIP database has no record for {ip}")

    fields = geo_fields(record)
    timezone = fields.timezone or timezones.at(fields.latitude, fields.longitude)
    # An IPinfo Lite file as the City database carries the AS too: no second source needed for it.
    info = asn_from_record(record) if asn_in_record else None
    if info is None:
        info = await asn.lookup(ip)
    network = ipaddress.ip_network(f"{ip}/{prefix_len}", strict=False) if prefix_len else None
    return {
        "ip": str(ip),
        "country": fields.country,
        "city": fields.city,
        "region": fields.region,
        "timezone": timezone,
        "latitude": fields.latitude,
        "longitude": fields.longitude,
        "isp": (info.isp or info.org) if info else None,
        "asn": info.asn if info else None,
        "org": info.org if info else None,
        "network": str(network) if network else None,
    }
