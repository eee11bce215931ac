"""Run every signal source for an address and combine what they found."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Signal, SignalSource
from ipintel.capabilities.vpn.verdict import verdict


async def detect_vpn(ip: IPAddress, sources: Sequence[SignalSource]) -> dict[str, Any]:
    """The VPN/proxy/hosting/mobile record of a (public, canonical) address.

    In-memory sources are awaited one after the other: a task per source
    would cost more than the lookups themselves. Sources that do I/O run
    concurrently, so a verdict costs one PTR round trip at most."""
    found: list[Signal] = []
    remote: list[SignalSource] = []
    for source in sources:
        if source.local:
            found.extend(await source.signals(ip))
        else:
            remote.append(source)
    if len(remote) == 1:
        found.extend(await remote[0].signals(ip))
    elif remote:
        for signals in await asyncio.gather(*(source.signals(ip) for source in remote)):
            found.extend(signals)
    return verdict(ip, found, complete=all(source.complete() for source in sources))
