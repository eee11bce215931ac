"""Blacklist check (docs/API.md#blacklist): DNSBL zones plus one reputation database, never reporting an
unverified answer as ``clear``. Its modules are listed in docs/ARCHITECTURE.md#the-tree; :func:`check` receives
its zones, resolver, self-tests and reputation client: nothing here is global.
"""

from ipintel.capabilities.blacklist.answers import classify_answer
from ipintel.capabilities.blacklist.check import check, is_definitive, overall_status, public_ipv4
from ipintel.capabilities.blacklist.codes import RETURN_CODES
from ipintel.capabilities.blacklist.self_tests import SelfTest, SelfTests, self_test
from ipintel.capabilities.blacklist.zones import Zone, ZoneConfigError, build_zones
from ipintel.capabilities.reputation import Reputation, SourceResult

__all__ = [
    "RETURN_CODES",
    "Reputation",
    "SelfTest",
    "SelfTests",
    "SourceResult",
    "Zone",
    "ZoneConfigError",
    "build_zones",
    "check",
    "classify_answer",
    "is_definitive",
    "overall_status",
    "public_ipv4",
    "self_test",
]
