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
- Relay before third-party lumping: on an address the relay's operator
  publishes as its egress (Apple's list), VPN, proxy and Tor signals that are
  only about the network (a listed prefix or AS) or a guess (PTR) are overruled:
  ``isVpn``, ``isProxy`` and ``isTor`` stay false, and the overruled signals
  stay in ``reasons``. Apple says what the prefix is used for; a third-party
  list that takes Apple's ranges as an input (X4BNet's VPN list does) lumps
  Safari users in with VPN subscribers. Exact evidence about the address (a
  single listed address, the Anonymous-IP database) still counts.
- ``confidence`` is about ``isVpn``. Positive: ``high`` when the exact address
  is on a primary list (a VPN provider's own server list, the Tor exit list),
  ``medium`` when it only falls in a VPN operator's prefix or AS, ``low`` when
  only heuristics fired. Negative: ``medium`` when every configured source was
  loaded and fresh, ``low`` otherwise (nothing proves a negative, so it is never
  ``high``).
- ``provider`` names the operator behind the signal that names one most
  directly (:class:`~.signals.Naming`: a VPN provider's own server list or the
  relay's operator, then a cloud's published ranges with the region, then a
  shipped AS list); ``None`` when no signal names one.
- ``reasons`` names every signal that fired, strongest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.capabilities.vpn.signals import Kind, Signal, Strength

# Indexed by the strongest anonymising Strength (0: none fired).
_CONFIDENCE = (None, "low", "medium", "high")
_TOR, _PROXY, _VPN = 1, 2, 4  # anonymising kinds as bits: a Tor exit is a proxy, any of them is isVpn


def _strongest_first(signal: Signal) -> int:
    return -signal.strength


def verdict(ip: IPAddress, signals: Sequence[Signal], *, complete: bool) -> dict[str, Any]:
    """The ``/ip/{ip}/vpn`` record for ``ip`` given everything the sources found.

    ``complete``: every configured source was loaded and fresh. One pass with
    identity tests rather than sets of kinds: this runs for every verdict, and
    hashing enum members is slow in Python."""
    is_hosting = is_mobile = is_relay = False
    exact = weak = 0  # anonymising kinds seen (bits: _TOR, _PROXY, _VPN), on exact evidence and on weaker
    weak_best = 0
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
        bit = _TOR if kind is Kind.TOR else _PROXY if kind is Kind.PROXY else _VPN
        if signal.strength >= Strength.EXACT:
            exact |= bit
        else:
            weak |= bit
            if signal.strength > weak_best:
                weak_best = signal.strength
    if is_relay:  # Apple's own list overrules network-level and heuristic listings: see the module docstring
        weak = weak_best = 0
    found = exact | weak
    best = Strength.EXACT if exact else weak_best
    confidence = _CONFIDENCE[best] if best else "medium" if complete else "low"
    ordered = sorted(signals, key=_strongest_first) if len(signals) > 1 else signals  # stable: ties keep order
    return {
        "ip": str(ip),
        "isVpn": found != 0,
        "isProxy": found & (_TOR | _PROXY) != 0,
        "isHosting": is_hosting,
        "isMobile": is_mobile,
        "isTor": found & _TOR != 0,
        "isRelay": is_relay,
        "provider": provider,
        "confidence": confidence,
        "reasons": list(dict.fromkeys(s.reason for s in ordered)),
    }
