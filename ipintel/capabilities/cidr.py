"""CIDR arithmetic (docs/API.md#cidr) for IPv4 and IPv6, with the /31 and /32 rules."""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import struct
from typing import Any

from ipintel.errors import ApiError

_RANGE = re.compile(r"([0-9A-Fa-f:.]{2,45})/([0-9]{1,3})")  # fullmatch: "$" would let "10.0.0.0/8\n" pass


def parse_range(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """``<address>/<prefix>`` as (address, prefix length); host bits may be set
    (``192.168.1.77/24``).

    Recent ranges are remembered parsed (bounded; the address objects are
    immutable): ``ipaddress`` parsing is the dearest step of the arithmetic,
    and a client asks about the same few ranges again and again. Only the
    parsing is remembered, never an answer: failures are not kept, and the
    record is computed afresh every time."""
    if type(text) is str and len(text) <= _MAX_RANGE_TEXT:
        return _parse_range_cached(text)
    return _parse_range(text)


_MAX_RANGE_TEXT = 64  # longer text cannot be a range; it is refused without being remembered


def _parse_range(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    if not isinstance(text, str) or not text:
        raise ApiError("invalid_range", "range is required, e.g. 192.168.1.0/24 or 2001:db8::/48")
    match = _RANGE.fullmatch(text)
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
    return ip, length


_parse_range_cached = functools.lru_cache(maxsize=1024)(_parse_range)


# An IPv4 address as text from its integer: two C calls.
_ntoa = socket.inet_ntoa
_pack_u32 = struct.Struct(">I").pack


def calculate(text: str) -> dict[str, Any]:
    """The CIDR record (docs/API.md#cidr); plain integer arithmetic on the parsed range (this
    route is not cached, so it is kept cheap)."""
    ip, prefix_length = parse_range(text)
    bits = ip.max_prefixlen
    host_bits = bits - prefix_length
    total = 1 << host_bits
    hostmask = total - 1
    mask = ((1 << bits) - 1) ^ hostmask
    first_addr = int(ip) & mask
    last_addr = first_addr | hostmask
    if ip.version == 6:
        # No broadcast in IPv6 (RFC 4291); every address is usable.
        network = str(ipaddress.IPv6Address(first_addr))
        return {
            "network": network,
            "broadcast": None,
            "subnetMask": ipaddress.IPv6Address(mask).exploded,
            "wildcardMask": None,
            "prefixLength": prefix_length,
            "totalHosts": total,
            "usableHosts": total,
            "firstHost": network,
            "lastHost": str(ipaddress.IPv6Address(last_addr)),
        }
    if host_bits == 0:
        usable, first, last = 1, first_addr, first_addr
    elif host_bits == 1:  # /31, RFC 3021: point-to-point, both addresses usable
        usable, first, last = 2, first_addr, last_addr
    else:
        usable, first, last = total - 2, first_addr + 1, last_addr - 1
    ntoa, pack = _ntoa, _pack_u32  # six addresses to format: the helpers' lookups are hoisted
    return {
        "network": ntoa(pack(first_addr)),
        "broadcast": ntoa(pack(last_addr)),
        "subnetMask": ntoa(pack(mask)),
        "wildcardMask": ntoa(pack(hostmask)),
        "prefixLength": prefix_length,
        "totalHosts": total,
        "usableHosts": usable,
        "firstHost": ntoa(pack(first)),
        "lastHost": ntoa(pack(last)),
    }
