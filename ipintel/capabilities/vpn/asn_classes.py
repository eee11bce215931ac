"""Curated classes of autonomous systems, shipped with the project: hosting
providers, VPN operators, mobile carriers.

The lists live in ``ipintel/data/asn/*.txt``; each file says where its facts
come from, and each line names the AS's registered holder so a reader can
check it (``whois AS21928``). They are deliberately short: an AS is listed
only when everything it announces is of that class, because an ASN signal
applies to every address of the AS (a carrier that also sells home broadband
from the same AS is not a "mobile carrier" here).

The address's AS comes from the shared :class:`~ipintel.capabilities.asn.AsnSource`
(an ASN ``.mmdb`` or Team Cymru's DNS interface).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnSource
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength
from ipintel.errors import ApiError

_LINE = re.compile(r"^AS(\d{1,10})\b", re.IGNORECASE)


def parse_asn_list(text: str) -> frozenset[int]:
    """``AS16509  Amazon.com, Inc.`` per line; ``#`` starts a comment. A line
    that does not start with an AS number is a mistake in a shipped file, and
    failing loudly (at start, in the tests) beats silently dropping it."""
    numbers = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.match(line)
        if not match:
            raise ValueError(f"line {lineno}: {raw!r} does not start with an AS number")
        numbers.add(int(match.group(1)))
    return frozenset(numbers)


@dataclass(frozen=True)
class AsnClasses:
    hosting: frozenset[int]
    vpn: frozenset[int]
    mobile: frozenset[int]

    @classmethod
    def shipped(cls) -> AsnClasses:
        """The lists in the package's ``data/asn`` directory."""
        base = resources.files("ipintel") / "data" / "asn"

        def read(name: str) -> frozenset[int]:
            return parse_asn_list((base / f"{name}.txt").read_text(encoding="utf-8"))

        return cls(hosting=read("hosting"), vpn=read("vpn"), mobile=read("mobile"))


class AsnClassSource:
    """The address's AS looked up in the curated classes.

    A VPN operator's AS is evidence about the network (``medium`` at best),
    never about the exact address. ``local`` is true when the AS source
    answers from a database rather than DNS."""

    name = "asn"

    def __init__(self, asn_source: AsnSource, classes: AsnClasses, *, local: bool) -> None:
        self.asn_source = asn_source
        self.classes = classes
        self.local = local

    async def signals(self, ip: IPAddress) -> Sequence[Signal]:
        try:
            info = await self.asn_source.lookup(ip)
        except ApiError:  # AsnSource promises not to raise; an ASN is garnish either way
            return ()
        if info is None:
            return ()
        number, found = info.number, []
        if number in self.classes.vpn:
            found.append(Signal(Kind.VPN, Strength.NETWORK, f"asn-vpn:AS{number}"))
        if number in self.classes.hosting:
            found.append(Signal(Kind.HOSTING, Strength.NETWORK, f"asn-hosting:AS{number}"))
        if number in self.classes.mobile:
            found.append(Signal(Kind.MOBILE, Strength.NETWORK, f"asn-mobile:AS{number}"))
        return found

    def complete(self) -> bool:
        return True  # the classes ship with the code
