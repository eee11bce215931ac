"""Reverse-DNS keywords: the weakest signal, a guess from the address's host name.

Operators often name their machines for what they do (``vpn-nl-12.example``, ``tor-exit-3.example.org``), and
carriers and clouds give their addresses recognisable names (``*.myvzw.com``, ``ec2-*.compute.amazonaws.com``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Protocol

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength
from ipintel.infra.resolver import DnsRecord, ResolverError

# Host names of mobile carriers' cellular addresses (the carrier's own domains).
MOBILE_DOMAINS: tuple[str, ...] = (
    "myvzw.com",  # Verizon Wireless
    "mycingular.net",  # AT&T Mobility
    "tmodns.net",  # T-Mobile US
)
# Default host names that cloud providers give their customers' addresses.
HOSTING_DOMAINS: tuple[str, ...] = (
    "amazonaws.com",  # ec2-1-2-3-4.compute-1.amazonaws.com
    "googleusercontent.com",  # 4.3.2.1.bc.googleusercontent.com
    "your-server.de",  # Hetzner
    "linodeusercontent.com",
    "members.linode.com",
    "vultrusercontent.com",
    "contaboserver.net",
)
_MAX_NAMES = 4  # PTR answers can hold many names; the first few are enough
_WORD = re.compile(r"[a-z]+")


class PtrResolver(Protocol):
    async def query(
        self, name: str, rdtype: str, *, timeout: float | None = None, source: str = "dns"
    ) -> list[DnsRecord]: ...


def _under(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def keyword_signals(host: str) -> list[Signal]:
    """What a host name suggests. Words are the letter runs of the name, so
    ``vpn12``, ``nordvpn`` and ``proxy-3`` match but ``vpnx`` inside another
    word's middle does not."""
    # Every signal here is HEURISTIC (confidence: low at most): anyone can name their own reverse zone anything.
    host = host.lower().rstrip(".")
    if len(host) > 253:
        return []
    words = _WORD.findall(host)
    found: list[Signal] = []
    if ("tor", "exit") in pairwise(words) or any(w.startswith("torexit") for w in words):
        found.append(Signal(Kind.TOR, Strength.HEURISTIC, "ptr:tor-exit"))
    if any(w.startswith("vpn") or w.endswith("vpn") for w in words):
        found.append(Signal(Kind.VPN, Strength.HEURISTIC, "ptr:vpn"))
    if any(w.startswith("proxy") or w.endswith("proxy") for w in words):
        found.append(Signal(Kind.PROXY, Strength.HEURISTIC, "ptr:proxy"))
    if any(_under(host, d) for d in MOBILE_DOMAINS):
        found.append(Signal(Kind.MOBILE, Strength.HEURISTIC, "ptr:mobile"))
    if any(_under(host, d) for d in HOSTING_DOMAINS):
        found.append(Signal(Kind.HOSTING, Strength.HEURISTIC, "ptr:hosting"))
    return found


class PtrKeywordSource:
    name = "ptr"
    local = False

    def __init__(self, resolver: PtrResolver, *, timeout: float) -> None:
        self.resolver = resolver
        self.timeout = timeout

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        try:
            # The outer deadline is a guard: the resolver enforces its own.
            async with asyncio.timeout(self.timeout + 0.5):
                records = await self.resolver.query(ip.reverse_pointer, "PTR", timeout=self.timeout, source="vpn-ptr")
        except (ResolverError, TimeoutError):  # timeout, NXDOMAIN, SERVFAIL: simply no signal
            return ()
        found: dict[str, Signal] = {}
        for record in records[:_MAX_NAMES]:
            if record.type == "PTR":
                for signal in keyword_signals(record.data):
                    found.setdefault(signal.reason, signal)
        return list(found.values())

    def complete(self) -> bool:
        return True  # a heuristic: its silence proves nothing, its failure costs nothing
