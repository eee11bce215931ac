"""Curated classes of autonomous systems shipped with the project (``ipintel/data/asn/*.txt``): hosting providers,
VPN operators, mobile carriers, each AS with its operator's name (the verdict's ``provider`` when no stronger
signal names one). Where the facts come from, and why the lists are short: docs/DATA.md#detection-sources-and-their-licences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnSource
from ipintel.capabilities.vpn.signals import Kind, Naming, Signal, Strength
from ipintel.errors import ApiError

_LINE = re.compile(r"^AS(\d{1,10})\b\s*(.*?)\s*(?:\[[a-z]+\])?$", re.IGNORECASE)


def parse_asn_entries(text: str) -> dict[int, str]:
    """AS number -> operator name, from ``AS16509  Amazon | AMAZON-02 - Amazon.com, Inc., US  [x4b]``
    lines: the name is the text before ``|``, or the whole description when there is none
    (``AS209854  Surfshark``); a trailing ``[source]`` mark is not part of it, and ``#``
    starts a comment. A line that does not start with an AS number is a mistake in a
    shipped file, and failing loudly (at start, in the tests) beats silently dropping it."""
    entries: dict[int, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.match(line)
        if not match:
            raise ValueError(f"line {lineno}: {raw!r} does not start with an AS number")
        entries[int(match.group(1))] = match.group(2).split("|", 1)[0].strip()
    return entries


def parse_asn_list(text: str) -> frozenset[int]:
    """The AS numbers of a list (see :func:`parse_asn_entries`)."""
    return frozenset(parse_asn_entries(text))


@dataclass(frozen=True)
class AsnClasses:
    hosting: frozenset[int]
    vpn: frozenset[int]
    mobile: frozenset[int]
    names: Mapping[int, str] = field(default_factory=dict)  # AS number -> operator name, from the lists

    @classmethod
    def shipped(cls) -> AsnClasses:
        """The lists in the package's ``data/asn`` directory."""
        base = resources.files("ipintel") / "data" / "asn"
        lists = {
            name: parse_asn_entries((base / f"{name}.txt").read_text(encoding="utf-8"))
            for name in ("hosting", "vpn", "mobile")
        }
        names = {number: name for entries in lists.values() for number, name in entries.items() if name}
        return cls(
            hosting=frozenset(lists["hosting"]),
            vpn=frozenset(lists["vpn"]),
            mobile=frozenset(lists["mobile"]),
            names=names,
        )


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
        classes = self.classes
        # The operator's name from the lists, not the AS source's organisation: only a listed AS is a signal.
        name = classes.names.get(number)
        naming = Naming.AS_LIST if name else Naming.NONE
        if number in classes.vpn:
            found.append(Signal(Kind.VPN, Strength.NETWORK, f"asn-vpn:AS{number}", name, naming))
        if number in classes.hosting:
            found.append(Signal(Kind.HOSTING, Strength.NETWORK, f"asn-hosting:AS{number}", name, naming))
        if number in classes.mobile:
            found.append(Signal(Kind.MOBILE, Strength.NETWORK, f"asn-mobile:AS{number}", name, naming))
        return found

    def complete(self) -> bool:
        return True  # the classes ship with the code
