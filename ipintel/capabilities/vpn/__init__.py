"""VPN, proxy, Tor, relay, hosting and mobile detection with explained verdicts (docs/API.md#vpn-detection).

Each source (one module: mmdb_sources, feed_ranges, asn_classes, ptr) reports signals (:class:`Signal`) about an
address; :func:`verdict` combines them into flags, confidence, provider and reasons; :func:`detect_vpn` runs both.
Every source receives its infrastructure; nothing here is global.
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
