"""From signals to an answer (docs/API.md#vpn-detection): each flag on its own evidence, one confidence for ``isVpn``.

- ``isTor``: a Tor-exit signal. ``isProxy``: Tor exit, public or residential
  proxy. ``isVpn``: the combined anonymisation verdict - a VPN-specific
  signal, or a proxy/Tor exit. ``isHosting``: datacenter or cloud.
  ``isMobile``: a cellular network. A hosting address with no VPN or proxy
  signal is ``isHosting: true, isVpn: false``: renting a server is not hiding
  behind one. ``isRelay``: a privacy relay's egress (iCloud Private Relay). A
  relay hides its user like a VPN would, but it is an Apple customer browsing
  through Apple's two-hop relay - not a VPN subscription, not a datacenter
  workload, not an open proxy - so the relay evidence sets no other flag.
- ``confidence`` is about ``isVpn``. Positive: ``high`` when the exact address
  is on a primary list, ``medium`` when it only falls in a VPN operator's
  prefix or AS, ``low`` when only heuristics fired. Negative: ``medium`` when
  every configured source was loaded and fresh, ``low`` otherwise (nothing
  proves a negative, so it is never ``high``). A relay address is not evidence
  for or against ``isVpn``, with one exception: on an address the relay's
  operator publishes as its egress, a VPN or proxy signal that is only about
  the network (a listed prefix or AS) gives ``low``, because Apple's own list
  says what the prefix is used for and third-party lists that lump relays in
  with VPNs are the likely cause; exact evidence about the address stays ``high``.
- ``provider`` names the operator behind the signal that names one most
  directly (:class:`~.signals.Naming`: the relay's operator, then a cloud's
  published ranges with the region, then a shipped AS list); ``None`` when no
  signal names one.
- ``reasons`` names every signal that fired, strongest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength

# Indexed by the strongest anonymising Strength (0: none fired).
_CONFIDENCE = (None, "low", "medium", "high")


def _strongest_first(signal: Signal) -> int:
    return -signal.strength


def verdict(ip: IPAddress, signals: Sequence[Signal], *, complete: bool) -> dict[str, Any]:
    """The ``/ip/{ip}/vpn`` record for ``ip`` given everything the sources found.

    ``complete``: every configured source was loaded and fresh. One pass with
    identity tests rather than sets of kinds: this runs for every verdict, and
    hashing enum members is slow in Python."""
    is_tor = is_proxy = is_vpn = is_hosting = is_mobile = is_relay = False
    best = 0
    provider, naming = None, 0
    for signal in signals:
        if signal.naming > naming:
            provider, naming = signal.provider, signal.naming
        kind = signal.kind
        if kind is Kind.HOSTING:
            is_hosting = True
            continue
        if kind is Kind.MOBILE:
            is_mobile = True
            continue
        if kind is Kind.RELAY:
            is_relay = True
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
        # The relay's own list against a third party's network-level listing: see the module docstring.
        confidence = "low" if is_relay and best < Strength.EXACT else _CONFIDENCE[best]
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
        "isRelay": is_relay,
        "provider": provider,
        "confidence": confidence,
        "reasons": list(dict.fromkeys(s.reason for s in ordered)),
    }
