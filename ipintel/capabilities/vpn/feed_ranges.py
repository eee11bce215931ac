"""The downloaded feeds as a signal source: which lists hold the address.

What each feed is evidence of, and whom it names, is its entry in :mod:`ipintel.infra.feed_catalogue`;
fetching, storing and matching the feeds is :mod:`ipintel.infra.feeds`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Naming, Signal, Strength
from ipintel.infra.feeds import HOST, FeedManager, named_provider
from ipintel.infra.ranges import AddressRanges


class FeedSource:
    name = "feeds"
    local = True

    def __init__(self, feeds: FeedManager) -> None:
        self.feeds = feeds
        # A misspelt ``evidence`` in the catalogue fails here, at start, not in a verdict.
        meanings = [
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
        # The providers' server lists (the feeds that tell servers from their subnets) are matched
        # through one combined index, rebuilt when one of them changes: a dozen lists then cost one
        # binary search per verdict rather than a dozen (make bench: about 1.3 µs each).
        self._meanings = [m for m in meanings if m[3] is None]
        self._servers = [m for m in meanings if m[3] is not None]
        self._combined: AddressRanges[tuple[int, str]] | None = None
        self._combined_from: list[AddressRanges[str] | None] = []
        self._generation = -1
        self._building: asyncio.Future[None] | None = None

    def _server_lists(self) -> AddressRanges[tuple[int, str]] | None:
        """The providers' lists as one index tagged ``(list number, host|net)``; ``None`` while it is
        being (re)built in a worker thread (a third of a second for 50,000 intervals: not on the loop)."""
        if self._generation != self.feeds.generation:
            self._generation = self.feeds.generation
            current = [meaning[0].ranges for meaning in self._servers]
            if self._combined is None or any(a is not b for a, b in zip(current, self._combined_from, strict=True)):
                self._combined = None
                if self._building is None or self._building.done():
                    self._building = asyncio.ensure_future(self._build(current))
        return self._combined

    async def _build(self, current: list[AddressRanges[str] | None]) -> None:
        def entries() -> list[tuple[int, int, int, tuple[int, str]]]:
            out: list[tuple[int, int, int, tuple[int, str]]] = []
            for number, ranges in enumerate(current):
                if ranges is not None:
                    for version, index in ((4, ranges.v4), (6, ranges.v6)):
                        out += [(version, a, b, (number, tag)) for a, b, tags in index.intervals() for tag in tags]
            return out

        combined = await asyncio.to_thread(lambda: AddressRanges.build(entries()))
        if all(a is b for a, b in zip(current, (m[0].ranges for m in self._servers), strict=True)):
            self._combined, self._combined_from = combined, current
        else:  # a list changed meanwhile: build again at the next verdict
            self._generation = -1

    def _lists_holding(self, value: int, v4: bool) -> dict[int, set[str]]:
        """Provider list number -> its tags (``host``, ``net``) for the address."""
        lists: dict[int, set[str]] = {}
        combined = self._server_lists()
        if combined is not None:
            for number, tag in (combined.v4 if v4 else combined.v6).lookup(value):
                lists.setdefault(number, set()).add(tag)
            return lists
        for number, meaning in enumerate(self._servers):  # until the combined index is built
            ranges = meaning[0].ranges
            if ranges is not None:
                found = (ranges.v4 if v4 else ranges.v6).lookup(value)
                if found:
                    lists[number] = set(found)
        return lists

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        # Called for every verdict with ~10 feeds: the address is converted once and each
        # feed's current index read directly (a refresh swaps it whole).
        value, v4 = int(ip), ip.version == 4
        found = []
        for state, kind, reason, _, exact, provider, naming in self._meanings:
            ranges = state.ranges
            if ranges is not None:
                tags = (ranges.v4 if v4 else ranges.v6).lookup(value)
                if tags:
                    if provider is not None and len(tags) > 1:  # host/net and a region's name
                        provider = named_provider(tags) or provider
                    # A listed single address is exact evidence, unless the feed is a third-party aggregate built
                    # from ASNs and ranges (X4BNet's lists: exact=False); a wider prefix is about the network.
                    strength = Strength.EXACT if exact and HOST in tags else Strength.NETWORK
                    found.append(Signal(kind, strength, reason, provider, naming if provider else Naming.NONE))
        lists = self._lists_holding(value, v4) if self._servers else {}
        # Two providers' lists hold the address (a server of one, a subnet of the other, or two
        # subnets): the hosting company rents the subnet out in parts, so it is nobody's network
        # (the servers themselves still count, as exact evidence).
        shared = len(lists) > 1
        for number in sorted(lists):
            _, kind, reason, subnet_reason, exact, provider, naming = self._servers[number]
            named = naming if provider else Naming.NONE
            if exact and HOST in lists[number]:
                found.append(Signal(kind, Strength.EXACT, reason, provider, named))
            elif not shared and subnet_reason is not None:  # vpn-subnet:<provider>, not vpn-server:
                found.append(Signal(kind, Strength.NETWORK, subnet_reason, provider, min(named, Naming.PUBLISHED)))
        return found

    def complete(self) -> bool:
        return self.feeds.complete()
