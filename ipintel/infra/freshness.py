"""How old a ``.mmdb`` file may be before /readyz calls it ``stale`` (docs/CONFIGURATION.md#freshness).

The default is twice its publisher's interval, so one missed update is not yet
stale and two are. A file says who published it only in its ``database_type``;
the intervals are the publishers' own:

- DB-IP Lite (``DBIP-*``): monthly, 60 days.
- MaxMind GeoLite2 (``GeoLite2-*``): twice a week, 7 days.
- MaxMind GeoIP2 Anonymous-IP: daily, 2 days; the other GeoIP2 files
  (City, Country, ISP, Connection-Type): weekly, 14 days.
- IPinfo Lite (``ipinfo ...``): daily, 2 days.
- Anything else, ip-location-db's repackaging of DB-IP (``city``,
  ``country``) included: 60 days, DB-IP's.

``IPINTEL_GEOIP_MAX_AGE`` replaces the default for every file.
"""

from __future__ import annotations

DAY = 86_400.0

DEFAULT_MAX_AGE = 60 * DAY

_MAX_AGES: tuple[tuple[str, float], ...] = (  # (database_type prefix, lower case) -> max age
    ("dbip", 60 * DAY),
    ("geolite2", 7 * DAY),
    ("geoip2-anonymous-ip", 2 * DAY),
    ("geoip2", 14 * DAY),
    ("ipinfo", 2 * DAY),
)


def max_age_of(database_type: str | None) -> float:
    """The default max age (seconds) of a file whose metadata says ``database_type``."""
    lowered = (database_type or "").lower()
    for prefix, age in _MAX_AGES:
        if lowered.startswith(prefix):
            return age
    return DEFAULT_MAX_AGE
