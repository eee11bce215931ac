"""Blacklist check (docs/API.md#blacklist): DNSBL zones plus one reputation database, never
reporting an unverified answer as ``clear``.

A DNSBL answers through the DNS, and the DNS between us and the list lies in
well-known ways: public resolvers get Spamhaus's error code 127.255.255.254
instead of data, some resolvers rewrite NXDOMAIN into an advertising address,
lists that died answer everything with 127.0.0.2 or nothing at all. So every
answer is validated, and every list is verified before it is believed:

    codes       what an A record means: return codes, reserved and error addresses
    zones       the configured zones (Spamhaus through DQS when keyed): Zone, build_zones
    answers     one query and its verdict: listed, clear, or unavailable with a detail
    self_tests  RFC 5782 self-tests of every zone, in the background: SelfTests
    check       the check of one address: every source concurrently, under one deadline

:func:`check` receives its zones, resolver, self-tests and reputation client;
nothing here is global.
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
