"""From signals to an answer (docs/API.md#vpn-detection): each flag on its own evidence, one confidence for
``isVpn``, the provider of the signal that names one most directly, and every reason, strongest first.
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
    # Relay before third-party lumping (docs/API.md#vpn-detection): Apple's own egress list overrules network-level
    # and heuristic listings; exact evidence about the address still counts.
    if is_relay:
        weak = weak_best = 0
    found = exact | weak
    best = Strength.EXACT if exact else weak_best
    # A negative is at best medium (every source loaded and fresh), never high: nothing proves a negative.
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
