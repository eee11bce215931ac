"""The configured DNSBL zones (``IPINTEL_DNSBL_ZONES``), checked once at start.

Spamhaus answers public resolvers with an error code, so with an account key
(``IPINTEL_SPAMHAUS_DQS_KEY``) its zones are queried through Data Query
Service instead: ``zen.spamhaus.org`` becomes ``<key>.zen.dq.spamhaus.net``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ipintel.capabilities.blacklist.codes import RETURN_CODES
from ipintel.settings import ConfigError

_SPAMHAUS_SUFFIX = ".spamhaus.org"
_DQS_SUFFIX = ".dq.spamhaus.net"
# Used with fullmatch: "$" also matches before a final newline, so "bl\n" would pass as a label.
_DQS_KEY = re.compile(r"[a-z0-9]{1,63}")
_ZONE_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Zone:
    """One DNSBL: the name clients see, and the name we query.

    They differ only for Spamhaus DQS, whose query zone carries the account's
    key (``<key>.zen.dq.spamhaus.net``); :attr:`name` is the same zone without
    the key, so ``sources`` stays recognisable and the key never leaves the
    process (details are built from :attr:`name` only)."""

    name: str
    query_zone: str
    codes: Mapping[str, str] | None = None  # None: the list documents no codes
    spamhaus: bool = False

    def query_name(self, ip: ipaddress.IPv4Address) -> str:
        return ".".join(reversed(str(ip).split("."))) + "." + self.query_zone


class ZoneConfigError(ConfigError):
    """A configured zone or DQS key that cannot work; the message names the variable."""


def build_zones(zones: Iterable[str], dqs_key: str | None = None) -> tuple[Zone, ...]:
    """The configured zones, with Spamhaus's switched to DQS when a key is given.

    Raises :class:`ZoneConfigError` for a zone name that is not a DNS name or
    is too long to be queried, and for a DQS key that is not one DNS label."""
    key = dqs_key.strip().lower() if dqs_key else None
    if key is not None and not _DQS_KEY.fullmatch(key):
        raise ZoneConfigError("IPINTEL_SPAMHAUS_DQS_KEY must be letters and digits (one DNS label)")
    built: list[Zone] = []
    seen: set[str] = set()
    for raw in zones:
        name = raw.strip().lower().rstrip(".")
        labels = name.split(".")
        if len(labels) < 2 or not all(_ZONE_LABEL.fullmatch(label) for label in labels):
            raise ZoneConfigError(f"IPINTEL_DNSBL_ZONES: {raw!r} is not a DNS zone name")
        is_spamhaus = name.endswith(_SPAMHAUS_SUFFIX) or name.endswith(_DQS_SUFFIX)
        codes = RETURN_CODES.get(name)
        query_zone = name
        if key is not None and name.endswith(_SPAMHAUS_SUFFIX):
            dataset = name[: -len(_SPAMHAUS_SUFFIX)]
            name = dataset + _DQS_SUFFIX
            query_zone = f"{key}.{name}"
        elif name.endswith(_DQS_SUFFIX):
            codes = RETURN_CODES.get(name[: -len(_DQS_SUFFIX)] + _SPAMHAUS_SUFFIX)
        # "255.255.255.255." is the longest reversed address: the query name must stay within 253.
        if len(query_zone) + 16 > 253:
            raise ZoneConfigError(f"IPINTEL_DNSBL_ZONES: {raw!r} is too long to be queried")
        if name in seen:
            continue
        seen.add(name)
        built.append(Zone(name, query_zone, codes, is_spamhaus))
    return tuple(built)
