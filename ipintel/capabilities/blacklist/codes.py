"""What a DNSBL's A records mean: the lists' documented return codes, and the
addresses RFC 5782 and Spamhaus reserve for something other than a listing.

A listing is an address in 127.0.0.0/8 (:data:`LISTING_RANGE`). Within it,
127.0.0.1 is never a listing (RFC 5782: it must not be listed), 127.0.0.2 is
the entry every list must carry for its self-test, and 127.255.255.0/24 is
where lists (Spamhaus by name) answer errors about the query, never about the
address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

LISTING_RANGE = ipaddress.IPv4Network("127.0.0.0/8")
ERROR_RANGE = ipaddress.IPv4Network("127.255.255.0/24")
NEVER_LISTED = ipaddress.IPv4Address("127.0.0.1")
TEST_LISTED = ipaddress.IPv4Address("127.0.0.2")

_SPAMHAUS_SBL = {
    "127.0.0.2": "SBL: spam source or spam operation",
    "127.0.0.3": "SBL CSS: snowshoe spam source",
    "127.0.0.9": "SBL DROP: hijacked or criminal netblock",
    "127.0.0.30": "SBL BCL: botnet controller",
}
_SPAMHAUS_XBL = {
    "127.0.0.4": "XBL: exploited or infected host",
    "127.0.0.5": "XBL: exploited or infected host",
    "127.0.0.6": "XBL: exploited or infected host",
    "127.0.0.7": "XBL: exploited or infected host",
}
_SPAMHAUS_PBL = {
    "127.0.0.10": "PBL: end-user range that should not send mail directly (listed by the ISP)",
    "127.0.0.11": "PBL: end-user range that should not send mail directly (listed by Spamhaus)",
}
_DRONEBL = {
    # Class 1 ("testing") is answered as 127.0.0.1, which RFC 5782 reserves: never a listing here.
    "127.0.0.2": "sample data",
    "127.0.0.3": "IRC spam drone",
    "127.0.0.5": "bottler",
    "127.0.0.6": "unknown spambot or worm",
    "127.0.0.7": "DDoS drone",
    "127.0.0.8": "open SOCKS proxy",
    "127.0.0.9": "open HTTP proxy",
    "127.0.0.10": "proxy chain",
    "127.0.0.11": "web page proxy",
    "127.0.0.12": "open DNS resolver",
    "127.0.0.13": "brute-force attacker",
    "127.0.0.14": "open WinGate proxy",
    "127.0.0.15": "compromised router or gateway",
    "127.0.0.16": "autorooting worm",
    "127.0.0.17": "automatically detected botnet host",
    "127.0.0.18": "possibly compromised DNS/MX host seen on IRC",
    "127.0.0.19": "abused VPN service",
    "127.0.0.255": "uncategorised threat",
}

RETURN_CODES: dict[str, Mapping[str, str]] = {
    # Spamhaus: docs.spamhaus.com, "Available Zones" (the zone table of the DNSBL datasets).
    "zen.spamhaus.org": {**_SPAMHAUS_SBL, **_SPAMHAUS_XBL, **_SPAMHAUS_PBL},
    "sbl-xbl.spamhaus.org": {**_SPAMHAUS_SBL, **_SPAMHAUS_XBL},
    "sbl.spamhaus.org": _SPAMHAUS_SBL,
    "xbl.spamhaus.org": _SPAMHAUS_XBL,
    "pbl.spamhaus.org": _SPAMHAUS_PBL,
    # SpamCop and PSBL each use a single code.
    "bl.spamcop.net": {"127.0.0.2": "reported as a spam source by SpamCop users and spam traps"},
    "psbl.surriel.com": {"127.0.0.2": "sent mail to PSBL's spam traps"},
    # DroneBL: its documented threat classes; the last octet is the class.
    "dnsbl.dronebl.org": _DRONEBL,
    # all.s5h.net documents no code table (it says only that it follows RFC 5782),
    # so any valid 127/8 answer counts there, as for any zone not in this table.
}

# Spamhaus's error range: answers about the query, never about the address.
SPAMHAUS_ERRORS = {
    "127.255.255.252": "typo in the DNSBL zone name",
    "127.255.255.254": "query through a public or open resolver, which Spamhaus refuses; use a local resolver",
    "127.255.255.255": "excessive number of queries (over the free-use quota)",
}
