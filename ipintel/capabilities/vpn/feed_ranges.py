"""The downloaded feeds as a signal source: which lists hold the address.

What each feed is evidence of is stated in its entry of the feed catalogue
(:mod:`ipintel.infra.feed_catalogue`, ``evidence`` and ``reason``), next to
where it comes from; fetching, storing and matching them is
:mod:`ipintel.infra.feeds`. An entry that is a single address (every Tor exit,
a VPN provider's server) is exact evidence, except on a third-party aggregate
built from ASNs and ranges (X4BNet's lists: ``exact=False``); a wider prefix is
evidence about the network, and so is the subnet a provider's servers cluster
in (reported as ``vpn-subnet:<provider>``, not ``vpn-server:``), unless the
subnets of two providers hold the address: a subnet rented out in parts is
nobody's network. A feed of one operator's ranges names it (the catalogue's
``provider``; with the entry's region where the format gives one); a VPN
provider's own server list names the VPN ("NordVPN"), ahead of whoever owns
the network the server stands in ("M247").
"""

from __future__ import annotations

from collections.abc import Sequence

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Naming, Signal, Strength
from ipintel.infra.feeds import HOST, FeedManager, named_provider


class FeedSource:
    name = "feeds"
    local = True

    def __init__(self, feeds: FeedManager) -> None:
        self.feeds = feeds
        # A misspelt ``evidence`` in the catalogue fails here, at start, not in a verdict.
        self._meanings = [
            (
                state,
                kind := Kind(state.spec.evidence),
                state.spec.reason,
                state.spec.network_reason,
                state.spec.exact,
                state.spec.provider,
                # A VPN provider's own server list and Apple's egress list name the service; a cloud's
                # ranges name the network's owner, and so do the subnets of a provider's servers (the
                # provider inferred as their owner, not published as such).
                Naming.SERVICE if kind in (Kind.RELAY, Kind.VPN) else Naming.PUBLISHED,
            )
            for state in feeds.feeds.values()
        ]

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        # Called for every verdict with ~10 feeds: the address is converted once and each
        # feed's current index read directly (a refresh swaps it whole).
        value, v4 = int(ip), ip.version == 4
        found = []
        subnets = 0
        for state, kind, reason, subnet_reason, exact, provider, naming in self._meanings:
            ranges = state.ranges
            if ranges is not None:
                tags = (ranges.v4 if v4 else ranges.v6).lookup(value)
                if tags:
                    if provider is not None and len(tags) > 1:  # host/net and a region's name
                        provider = named_provider(tags) or provider
                    named = naming if provider else Naming.NONE
                    if subnet_reason is not None:  # a provider's list: its server or its subnet holds the address
                        subnets += 1
                    if exact and HOST in tags:
                        found.append(Signal(kind, Strength.EXACT, reason, provider, named))
                    elif subnet_reason is not None:  # only a subnet of the provider's servers holds it
                        found.append(
                            Signal(kind, Strength.NETWORK, subnet_reason, provider, min(named, Naming.PUBLISHED))
                        )
                    else:
                        found.append(Signal(kind, Strength.NETWORK, reason, provider, named))
        if subnets > 1:
            # Two providers' lists hold the address (a server of one, a subnet of the other, or two subnets):
            # the hosting company rents the subnet out in parts, so it is nobody's network (the servers
            # themselves still count, as exact evidence).
            found = [s for s in found if not s.reason.startswith("vpn-subnet:")]
        return found

    def complete(self) -> bool:
        return self.feeds.complete()
