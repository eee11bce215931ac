"""The downloaded feeds as a signal source: which lists hold the address.

What each feed means lives here; fetching, storing and matching them is
:mod:`ipintel.infra.feeds`. An entry that is a single address (every Tor exit,
a VPN provider's server) is exact evidence; a wider prefix is evidence about
the network.
"""

from __future__ import annotations

from collections.abc import Sequence

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength
from ipintel.infra.feeds import HOST, FeedManager

# feed name -> (what being on it means, the reason reported)
FEED_MEANINGS: dict[str, tuple[Kind, str]] = {
    "tor": (Kind.TOR, "tor-exit"),
    "vpn": (Kind.VPN, "vpn-range:x4bnet"),
    "aws": (Kind.HOSTING, "cloud:aws"),
    "gcp": (Kind.HOSTING, "cloud:gcp"),
    "azure": (Kind.HOSTING, "cloud:azure"),
    "oracle": (Kind.HOSTING, "cloud:oracle"),
    "cloudflare": (Kind.HOSTING, "cloud:cloudflare"),
    "digitalocean": (Kind.HOSTING, "cloud:digitalocean"),
    # X4BNet's datacenter list holds VPN networks too, but does not say which:
    # it is evidence of hosting only.
    "datacenter": (Kind.HOSTING, "datacenter:x4bnet"),
}


class FeedSource:
    name = "feeds"
    local = True

    def __init__(self, feeds: FeedManager) -> None:
        self.feeds = feeds
        self._meanings = [(state, *FEED_MEANINGS[name]) for name, state in feeds.feeds.items() if name in FEED_MEANINGS]

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        # Called for every verdict with ~10 feeds: the address is converted once and each
        # feed's current index read directly (a refresh swaps it whole).
        value, v4 = int(ip), ip.version == 4
        found = []
        for state, kind, reason in self._meanings:
            ranges = state.ranges
            if ranges is not None:
                tags = (ranges.v4 if v4 else ranges.v6).lookup(value)
                if tags:
                    found.append(Signal(kind, Strength.EXACT if HOST in tags else Strength.NETWORK, reason))
        return found

    def complete(self) -> bool:
        return self.feeds.complete()
