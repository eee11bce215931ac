"""VPN, proxy, Tor, relay, hosting and mobile detection with explained verdicts (docs/API.md#vpn-detection).

    sources (one module each)          signals                 verdict
    ─────────────────────────          ───────                 ───────
    mmdb_sources  Anonymous-IP  ─┐
                  Connection-Type├─>  Signal(kind, strength,  ─> verdict.verdict():
    feed_ranges   Tor, clouds,   │           reason,              flags, confidence,
                  VPN/DC lists,  │           provider, naming)    provider, reasons
                  iCloud relay   │
    asn_classes   curated ASNs   │
    ptr           PTR keywords  ─┘

:func:`detect_vpn` runs the sources for an address and combines their
signals. Every source receives its infrastructure (database files, the feed
manager, the AS source, the resolver); nothing here is global.
"""

from ipintel.capabilities.vpn.asn_classes import AsnClasses, AsnClassSource
from ipintel.capabilities.vpn.detect import detect_vpn
from ipintel.capabilities.vpn.feed_ranges import FeedSource
from ipintel.capabilities.vpn.mmdb_sources import AnonymousIpSource, ConnectionTypeSource
from ipintel.capabilities.vpn.ptr import PtrKeywordSource
from ipintel.capabilities.vpn.signals import Kind, Naming, Signal, SignalSource, Strength
from ipintel.capabilities.vpn.verdict import verdict

__all__ = [
    "AnonymousIpSource",
    "AsnClassSource",
    "AsnClasses",
    "ConnectionTypeSource",
    "FeedSource",
    "Kind",
    "Naming",
    "PtrKeywordSource",
    "Signal",
    "SignalSource",
    "Strength",
    "detect_vpn",
    "verdict",
]
