"""``.mmdb`` fixtures written by the tests with mmdb-writer; no binary is committed.

Records follow the real GeoIP2/GeoLite2 shapes (City, ASN, Anonymous-IP,
Connection-Type) and DB-IP Lite's (a City record without ``time_zone``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import netaddr
from mmdb_writer import MMDBWriter

from ipintel.infra.mmdb import GeoDatabases


def write_mmdb(path: Path, database_type: str, networks: dict[str, dict[str, Any]]) -> Path:
    """Write an IPv6 database (IPv4 mapped in, as MaxMind's are) holding ``networks``."""
    writer = MMDBWriter(
        ip_version=6,
        ipv4_compatible=True,
        database_type=database_type,
        languages=["en"],
        description={"en": f"ipintel test {database_type}"},
    )
    for cidr, record in networks.items():
        writer.insert_network(netaddr.IPSet([cidr]), record)
    writer.to_db_file(str(path))
    return path


def city_record(
    *,
    country: str | None,
    city: str | None = None,
    region: str | None = None,
    latitude: float | None = None,
    longitude: float | None = None,
    time_zone: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {}
    if country:
        record["country"] = {"iso_code": country, "names": {"en": country}}
    if city:
        record["city"] = {"names": {"en": city}}
    if region:
        record["subdivisions"] = [{"names": {"en": region}}]
    location: dict[str, Any] = {}
    if latitude is not None:
        location["latitude"] = latitude
        location["longitude"] = longitude
    if time_zone:
        location["time_zone"] = time_zone
    if location:
        record["location"] = location
    return record


# A realistic small world: Google DNS (GeoLite2 shape with a time zone), a
# Chicago address without one (DB-IP Lite shape), a country-only record, and
# an IPv6 prefix.
_GOOGLE = city_record(
    country="US",
    city="Mountain View",
    region="California",
    latitude=37.4223,
    longitude=-122.085,
    time_zone="America/Los_Angeles",
)
CITY_NETWORKS: dict[str, dict[str, Any]] = {
    "8.8.8.0/24": _GOOGLE,
    "8.8.4.0/24": city_record(
        country="US", city="Mountain View", region="California", latitude=37.386, longitude=-122.0838
    ),  # no time zone: derived
    "12.0.0.0/16": city_record(country="US", city="Chicago", region="Illinois", latitude=41.8781, longitude=-87.6298),
    "81.2.69.0/24": city_record(
        country="GB", city="London", region="England", latitude=51.5142, longitude=-0.0931, time_zone="Europe/London"
    ),
    "1.1.1.0/24": city_record(country="AU"),  # country only: city, region, coordinates unknown
    "2001:4860::/32": _GOOGLE,
}

ASN_NETWORKS: dict[str, dict[str, Any]] = {
    "8.8.8.0/24": {"autonomous_system_number": 15169, "autonomous_system_organization": "Google LLC"},
    "8.8.4.0/24": {"autonomous_system_number": 15169, "autonomous_system_organization": "Google LLC"},
    "81.2.69.0/24": {"autonomous_system_number": 20712, "autonomous_system_organization": "Andrews & Arnold Ltd"},
    "2001:4860::/32": {"autonomous_system_number": 15169, "autonomous_system_organization": "Google LLC"},
}


def write_city_db(path: Path, networks: dict[str, dict[str, Any]] | None = None) -> Path:
    return write_mmdb(path, "GeoLite2-City", CITY_NETWORKS if networks is None else networks)


def write_asn_db(path: Path, networks: dict[str, dict[str, Any]] | None = None) -> Path:
    return write_mmdb(path, "GeoLite2-ASN", ASN_NETWORKS if networks is None else networks)


def reload_changed(databases: GeoDatabases) -> list[str]:
    """Reload at once every file whose mtime or size changed (what the
    watcher does after its settle interval); the kinds reloaded."""
    return [db.kind for db in databases.all() if db.changed_on_disk() and db.load()]
