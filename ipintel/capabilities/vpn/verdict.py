"""From signals to an answer (SPEC 3.2): each flag on its own evidence, one confidence for ``isVpn``.

- ``isTor``: a Tor-exit signal. ``isProxy``: Tor exit, public or residential
  proxy. ``isVpn``: the combined anonymisation verdict - a VPN-specific
  signal, or a proxy/Tor exit. ``isHosting``: datacenter or cloud.
  ``isMobile``: a cellular network. A hosting address with no VPN or proxy
  signal is ``isHosting: true, isVpn: false``: renting a server is not hiding
  behind one.
- ``confidence`` is about ``isVpn``. Positive: ``high`` when the exact address
  is on a primary list, ``medium`` when it only falls in a VPN operator's
  prefix or AS, ``low`` when only heuristics fired. Negative: ``medium`` when
  every configured source was loaded and fresh, ``low`` otherwise (nothing
  proves a negative, so it is never ``high``).
- ``reasons`` names every signal that fired, strongest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength

ANONYMISING = frozenset({Kind.VPN, Kind.PROXY, Kind.TOR})
_CONFIDENCE = {Strength.EXACT: "high", Strength.NETWORK: "medium", Strength.HEURISTIC: "low"}


def verdict(ip: IPAddress, signals: Iterable[Signal], *, complete: bool) -> dict[str, Any]:
    """The ``/ip/{ip}/vpn`` record for ``ip`` given everything the sources found.

    ``complete``: every configured source was loaded and fresh."""
    found = sorted(signals, key=lambda s: -s.strength)  # stable: ties keep the sources' order
    kinds = {s.kind for s in found}
    is_tor = Kind.TOR in kinds
    is_proxy = is_tor or Kind.PROXY in kinds
    is_vpn = is_proxy or Kind.VPN in kinds
    anonymising = [s.strength for s in found if s.kind in ANONYMISING]
    if anonymising:
        confidence = _CONFIDENCE[max(anonymising)]
    else:
        confidence = "medium" if complete else "low"
    return {
        "ip": str(ip),
        "isVpn": is_vpn,
        "isProxy": is_proxy,
        "isHosting": Kind.HOSTING in kinds,
        "isMobile": Kind.MOBILE in kinds,
        "isTor": is_tor,
        "confidence": confidence,
        "reasons": list(dict.fromkeys(s.reason for s in found)),
    }
