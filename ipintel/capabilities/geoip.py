"""GeoIP (docs/API.md#geoip): where an address is, and which network announces it.

City data comes from a City ``.mmdb``; the time zone from the record or,
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
from ipintel.errors import ApiError
from ipintel.infra.mmdb import MmdbFile


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


def _name(node: Any) -> str | None:
    if isinstance(node, dict):
        names = node.get("names")
        if isinstance(names, dict):
            name = names.get("en")
            if isinstance(name, str) and name:
                return name
    return None


def _object(value: Any) -> dict[str, Any]:
    """A record's sub-object, or an empty one when it is missing or not an object."""
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


async def lookup(ip: IPAddress, *, city_db: MmdbFile, asn: AsnSource, timezones: TimeZones) -> dict[str, Any]:
    """The GeoIP record of a public address (the caller has checked it is public)."""
    if not city_db.loaded:
        raise ApiError("geoip_unavailable", "no GeoIP database is loaded")
    record, prefix_len = city_db.lookup(ip)
    if not record:
        raise ApiError("address_not_found", f"the GeoIP database has no record for {ip}")

    location = _object(record.get("location"))
    latitude = _number(location.get("latitude"))
    longitude = _number(location.get("longitude"))
    timezone = location.get("time_zone") if isinstance(location.get("time_zone"), str) else None
    if not timezone:
        timezone = timezones.at(latitude, longitude)
    country = _object(record.get("country"))
    iso = country.get("iso_code") if isinstance(country.get("iso_code"), str) else None
    subdivisions = record.get("subdivisions")
    region = _name(subdivisions[0]) if isinstance(subdivisions, list) and subdivisions else None

    info = await asn.lookup(ip)
    network = ipaddress.ip_network(f"{ip}/{prefix_len}", strict=False) if prefix_len else None
    return {
        "ip": str(ip),
        "country": iso,
        "city": _name(record.get("city")),
        "region": region,
        "timezone": timezone,
        "latitude": latitude,
        "longitude": longitude,
        "isp": info.org if info else None,
        "asn": info.asn if info else None,
        "org": info.org if info else None,
        "network": str(network) if network else None,
    }
