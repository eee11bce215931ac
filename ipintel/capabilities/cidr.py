"""CIDR arithmetic (SPEC 3.6) for IPv4 and IPv6, with the /31 and /32 rules."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ipintel.errors import ApiError

_RANGE = re.compile(r"^([0-9A-Fa-f:.]{2,45})/([0-9]{1,3})$")


def parse_range(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """``<address>/<prefix>``; host bits may be set (``192.168.1.77/24``)."""
    if not isinstance(text, str) or not text:
        raise ApiError("invalid_range", "range is required, e.g. 192.168.1.0/24 or 2001:db8::/48")
    match = _RANGE.match(text)
    if match is None:
        shown = text if len(text) <= 60 else text[:56] + "…"
        raise ApiError("invalid_range", f"{shown!r} is not a range of the form <address>/<prefix length>")
    address, prefix = match.groups()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ApiError("invalid_range", f"{address!r} is not an IPv4 or IPv6 address") from None
    length = int(prefix)
    if length > ip.max_prefixlen:
        raise ApiError(
            "invalid_range", f"prefix length {length} is out of bounds for IPv{ip.version} (0-{ip.max_prefixlen})"
        )
    return ipaddress.ip_network(f"{ip}/{length}", strict=False)


def calculate(text: str) -> dict[str, Any]:
    net = parse_range(text)
    total = net.num_addresses
    first_addr, last_addr = net.network_address, net.broadcast_address
    if net.version == 6:
        # No broadcast in IPv6 (RFC 4291); every address is usable.
        return {
            "network": str(net.network_address),
            "broadcast": None,
            "subnetMask": net.netmask.exploded,
            "wildcardMask": None,
            "prefixLength": net.prefixlen,
            "totalHosts": total,
            "usableHosts": total,
            "firstHost": str(first_addr),
            "lastHost": str(last_addr),
        }
    if net.prefixlen == 32:
        usable, first, last = 1, first_addr, first_addr
    elif net.prefixlen == 31:  # RFC 3021: point-to-point, both addresses usable
        usable, first, last = 2, first_addr, last_addr
    else:
        usable, first, last = total - 2, first_addr + 1, last_addr - 1
    return {
        "network": str(net.network_address),
        "broadcast": str(net.broadcast_address),
        "subnetMask": str(net.netmask),
        "wildcardMask": str(net.hostmask),
        "prefixLength": net.prefixlen,
        "totalHosts": total,
        "usableHosts": usable,
        "firstHost": str(first),
        "lastHost": str(last),
    }
