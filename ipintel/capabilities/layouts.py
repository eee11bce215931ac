"""Reading a ``.mmdb`` record, whatever its publisher's layout (docs/CONFIGURATION.md#geoip-databases).

A record is read by what it holds: a file names its layout only in free text (``database_type``:
``GeoLite2-City``, ``DBIP-City-Lite``, ``city``...). :data:`NEEDS` says what each kind of database must give;
ipintel/infra/mmdb.py refuses a file none of whose sampled records gives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipintel.infra.mmdb import RecordCheck


@dataclass(frozen=True)
class AsnInfo:
    number: int
    org: str | None
    isp: str | None = None  # only GeoIP2-ISP names the ISP apart from the AS's organisation

    @property
    def asn(self) -> str:
        return f"AS{self.number}"


@dataclass(frozen=True)
class GeoFields:
    country: str | None = None
    city: str | None = None
    region: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    timezone: str | None = None

    def any(self) -> bool:
        return any(value is not None for value in (self.country, self.city, self.region, self.latitude))


def _text(value: Any) -> str | None:
    """A non-empty string, else ``None`` (ip-location-db writes ``""`` for unknown)."""
    return value.strip() or None if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _name(node: Any) -> str | None:
    """The English name of a MaxMind-layout object (``{"names": {"en": ...}}``)."""
    if isinstance(node, dict):
        names = node.get("names")
        if isinstance(names, dict):
            return _text(names.get("en"))
    return None


def _country_code(value: Any) -> str | None:
    code = _text(value)
    return code.upper() if code and len(code) == 2 and code.isalpha() else None


def geo_fields(record: dict[str, Any]) -> GeoFields:
    """The location facts of a City or Country record in any of the layouts above."""
    country = record.get("country")
    if isinstance(country, dict) or isinstance(record.get("location"), dict) or isinstance(record.get("city"), dict):
        # MaxMind and DB-IP Lite. A Country database has no city nor location: those stay null.
        found = record.get("location")
        location: dict[str, Any] = found if isinstance(found, dict) else {}
        subdivisions = record.get("subdivisions")
        return GeoFields(
            country=_country_code(country.get("iso_code")) if isinstance(country, dict) else None,
            city=_name(record.get("city")),
            region=_name(subdivisions[0]) if isinstance(subdivisions, list) and subdivisions else None,
            latitude=_number(location.get("latitude")),
            longitude=_number(location.get("longitude")),
            timezone=_text(location.get("time_zone")),
        )
    # Flat: ip-location-db (country_code, state1, city, ...), IPinfo Lite (country_code), IPinfo country_asn
    # (country, a code).
    latitude, longitude = _number(record.get("latitude")), _number(record.get("longitude"))
    return GeoFields(
        country=_country_code(record.get("country_code")) or _country_code(country),
        city=_text(record.get("city")),
        region=_text(record.get("state1")),
        latitude=latitude if longitude is not None else None,
        longitude=longitude if latitude is not None else None,
        timezone=_text(record.get("timezone")),
    )


def asn_from_record(record: dict[str, Any]) -> AsnInfo | None:
    """The AS of a record: MaxMind/DB-IP/ip-location-db (``autonomous_system_number``) or IPinfo
    (``asn`` ``"AS15169"``, ``as_name``); ``None`` when it names none."""
    number: Any = record.get("autonomous_system_number")
    org = record.get("autonomous_system_organization")
    if number is None and "asn" in record:
        asn = record["asn"]
        text = asn.strip().upper().removeprefix("AS") if isinstance(asn, str) else None
        number = int(text) if text and text.isdigit() else asn if isinstance(asn, int) else None
        org = record.get("as_name") or record.get("name")
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        return None
    return AsnInfo(number, _text(org), _text(record.get("isp")))


def _anonymous(record: dict[str, Any]) -> bool:
    return any(isinstance(value, bool) for key, value in record.items() if key.startswith("is_"))


def _connection(record: dict[str, Any]) -> bool:
    return _text(record.get("connection_type")) is not None


# What each kind of database must give (docs/CONFIGURATION.md#geoip-databases).
NEEDS: dict[str, RecordCheck] = {
    "city": RecordCheck(
        "a country, city or location (MaxMind/DB-IP country.iso_code, city, location; "
        "ip-location-db/IPinfo country_code, city, latitude)",
        lambda record: geo_fields(record).any(),
    ),
    "asn": RecordCheck(
        "an AS number (autonomous_system_number, or IPinfo's asn)",
        lambda record: asn_from_record(record) is not None,
    ),
    "anonymous": RecordCheck("an is_anonymous_vpn/is_tor_exit_node/... flag (GeoIP2 Anonymous-IP)", _anonymous),
    "connection": RecordCheck("a connection_type (GeoIP2 Connection-Type)", _connection),
}
