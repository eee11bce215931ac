"""How old a ``.mmdb`` file may be before /readyz calls it ``stale``: by default twice its publisher's interval,
known from its ``database_type`` (the intervals: docs/CONFIGURATION.md#freshness).
"""

from __future__ import annotations

DAY = 86_400.0

DEFAULT_MAX_AGE = 60 * DAY

# Twice each publisher's interval: one missed update is not yet stale, two are.
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
