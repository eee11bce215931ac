"""What a detection source reports: signals, and the one interface every source implements.

A :class:`Signal` is one piece of evidence about an address: its :class:`Kind`, :class:`Strength`, the
``reason`` the answer shows and, when the evidence names one, the operator. Sources never decide the verdict
(:mod:`.verdict` does), so adding a source is one :class:`SignalSource` module and one line in ``Intel.vpn_sources``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Protocol

from ipintel.addresses import IPAddress


class Kind(Enum):
    """What a signal is evidence of. Each answer flag reads its own kinds."""

    VPN = "vpn"  # a VPN service's address or network
    PROXY = "proxy"  # a public or residential proxy
    TOR = "tor"  # a Tor exit (also a proxy)
    HOSTING = "hosting"  # a datacenter or cloud network
    MOBILE = "mobile"  # a cellular network
    RELAY = "relay"  # a privacy relay's egress (iCloud Private Relay): hides its user, but is not a VPN


class Strength(IntEnum):
    """How much a signal proves, strongest last (so ``max`` picks the best)."""

    HEURISTIC = 1  # a guess from names (reverse-DNS keywords)
    NETWORK = 2  # the address falls in a prefix or AS of such an operator
    EXACT = 3  # the exact address is on a primary list (Tor exits, a VPN provider's servers, the Anonymous-IP database)


class Naming(IntEnum):
    """How directly a signal names the operator behind an address, strongest last (docs/API.md#vpn-detection).

    Independent of :class:`Strength`: a signal can be exact evidence of a Tor
    exit and name nobody. A service's own list beats the network's owner because
    VPN servers and relays stand in rented (hosting, CDN, cloud) space: the
    answer a reader wants for a NordVPN server is "NordVPN", not "M247"."""

    NONE = 0
    AS_LIST = 1  # the address's AS is on a shipped list: its holder runs the network the address is in
    PUBLISHED = 2  # the operator publishes the prefix as its own (a cloud provider's ranges, with the region)
    SERVICE = 3  # the operator publishes the address or prefix as its service's server or egress (a VPN
    # provider's server list, iCloud Private Relay): more specific than the network's owner


@dataclass(frozen=True, slots=True)
class Signal:
    kind: Kind
    strength: Strength
    reason: str
    provider: str | None = None  # the operator the evidence names ("AWS us-east-1"), if any
    naming: Naming = Naming.NONE  # how directly it names it


class SignalSource(Protocol):
    """Looks an address up in one body of evidence.

    ``local`` sources answer from memory (databases, feeds, shipped files):
    they are awaited in turn, which costs a few microseconds. The others do
    I/O (a PTR query) and are run concurrently. ``complete()`` says whether
    every dataset the source relies on is loaded and fresh: a negative
    verdict is only as good as the sources that could have contradicted it."""

    name: str
    local: bool

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        """The evidence about ``ip``; empty when there is none. Never raises
        for a data or network problem: a failing source is no evidence."""
        ...

    def complete(self) -> bool: ...
