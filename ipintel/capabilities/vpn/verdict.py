"""From signals to an answer (docs/API.md#vpn-detection): each flag on its own evidence, one confidence for ``isVpn``.

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

from collections.abc import Sequence
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal

# Indexed by the strongest anonymising Strength (0: none fired).
_CONFIDENCE = (None, "low", "medium", "high")


def _strongest_first(signal: Signal) -> int:
    return -signal.strength


def verdict(ip: IPAddress, signals: Sequence[Signal], *, complete: bool) -> dict[str, Any]:
    """The ``/ip/{ip}/vpn`` record for ``ip`` given everything the sources found.

    ``complete``: every configured source was loaded and fresh. One pass with
    identity tests rather than sets of kinds: this runs for every verdict, and
    hashing enum members is slow in Python."""
    is_tor = is_proxy = is_vpn = is_hosting = is_mobile = False
    best = 0
    for signal in signals:
        kind = signal.kind
        if kind is Kind.HOSTING:
            is_hosting = True
            continue
        if kind is Kind.MOBILE:
            is_mobile = True
            continue
        if kind is Kind.TOR:
            is_tor = True
        elif kind is Kind.PROXY:
            is_proxy = True
        elif kind is Kind.VPN:
            is_vpn = True
        if signal.strength > best:
            best = signal.strength
    is_proxy = is_proxy or is_tor
    if best:
        confidence = _CONFIDENCE[best]
    else:
        confidence = "medium" if complete else "low"
    ordered = sorted(signals, key=_strongest_first) if len(signals) > 1 else signals  # stable: ties keep order
    return {
        "ip": str(ip),
        "isVpn": is_vpn or is_proxy,
        "isProxy": is_proxy,
        "isHosting": is_hosting,
        "isMobile": is_mobile,
        "isTor": is_tor,
        "confidence": confidence,
        "reasons": list(dict.fromkeys(s.reason for s in ordered)),
    }
