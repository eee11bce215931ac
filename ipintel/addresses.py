"""Parsing and classifying what clients send: IP addresses, domain names and AS numbers.

Every capability takes client text through these functions, so the rules of
docs/API.md#addresses-and-domain-names (canonical forms, IPv4-mapped IPv6,
zone ids, IDN, reserved ranges) live in exactly one place.
"""

from __future__ import annotations

import functools
import ipaddress
import re

import idna

from ipintel.errors import ApiError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Longest textual IPv6 form is 45 characters (IPv4-embedded); anything longer
# is rejected before the parser sees it.
_MAX_IP_TEXT = 45


def parse_ip(text: str) -> IPAddress:
    """Parse an address as a client wrote it; raise ``invalid_ip`` otherwise.

    Recent answers are memoised (bounded): the same few addresses are asked
    about over and over, and ``ipaddress`` parsing is the dearest step of a
    cached lookup. Failures are not memoised."""
    if type(text) is str and 0 < len(text) <= _MAX_IP_TEXT:
        return _parse_ip_cached(text)
    return _parse_ip(text)


def _parse_ip(text: str) -> IPAddress:
    """Parse an address as a client wrote it; raise ``invalid_ip`` otherwise.

    Zone ids (``fe80::1%eth0``) are refused: they name an interface of the
    client's machine and mean nothing to us. An IPv4-mapped IPv6 address is
    the IPv4 address it carries (docs/API.md#addresses-and-domain-names).
    """
    if not isinstance(text, str) or not text or len(text) > _MAX_IP_TEXT or "%" in text:
        raise ApiError("invalid_ip", f"{_show(text)} is not an IPv4 or IPv6 address")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise ApiError("invalid_ip", f"{_show(text)} is not an IPv4 or IPv6 address") from None
    return canonical(ip)


def canonical(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv4-mapped IPv6 address (``::ffff:8.8.8.8``) carries, else ``ip`` itself.

    Dual-stack sockets and proxies write IPv4 clients that way; one host must
    have one answer, one cache entry and one rate-limit key whichever form it
    arrives in (docs/API.md#addresses-and-domain-names)."""
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


_parse_ip_cached = functools.lru_cache(maxsize=8192)(_parse_ip)


def _show(text: object, limit: int = 64) -> str:
    """Quote client input for an error message without echoing kilobytes of it."""
    shown = repr(text) if isinstance(text, str) else repr(type(text).__name__)
    return shown if len(shown) <= limit else shown[: limit - 4] + "…'"


# Non-global ranges, most specific first, each with the words an error message
# uses. Sources: the IANA IPv4 and IPv6 Special-Purpose Address Registries.
_RESERVED_V4: list[tuple[str, str]] = [
    ("255.255.255.255/32", "the limited broadcast address (RFC 919)"),
    ("0.0.0.0/8", "the 'this network' range (RFC 791)"),
    ("10.0.0.0/8", "a private range (RFC 1918)"),
    ("100.64.0.0/10", "the shared address space for carrier-grade NAT (RFC 6598)"),
    ("127.0.0.0/8", "the loopback range (RFC 1122)"),
    ("169.254.0.0/16", "the link-local range (RFC 3927)"),
    ("172.16.0.0/12", "a private range (RFC 1918)"),
    ("192.0.0.0/24", "the IETF protocol assignments range (RFC 6890)"),
    ("192.0.2.0/24", "a documentation range (RFC 5737)"),
    ("192.88.99.0/24", "the deprecated 6to4 relay anycast range (RFC 7526)"),
    ("192.168.0.0/16", "a private range (RFC 1918)"),
    ("198.18.0.0/15", "the benchmarking range (RFC 2544)"),
    ("198.51.100.0/24", "a documentation range (RFC 5737)"),
    ("203.0.113.0/24", "a documentation range (RFC 5737)"),
    ("224.0.0.0/4", "the multicast range (RFC 5771)"),
    ("240.0.0.0/4", "the reserved range (RFC 1112)"),
]
_RESERVED_V6: list[tuple[str, str]] = [
    ("::/128", "the unspecified address (RFC 4291)"),
    ("::1/128", "the loopback address (RFC 4291)"),
    ("::/96", "the deprecated IPv4-compatible range (RFC 4291)"),
    ("64:ff9b:1::/48", "the local-use NAT64 range (RFC 8215)"),
    ("100::/64", "the discard-only range (RFC 6666)"),
    ("2001:db8::/32", "a documentation range (RFC 3849)"),
    ("3fff::/20", "a documentation range (RFC 9637)"),
    ("2001:2::/48", "the benchmarking range (RFC 5180)"),
    ("2001::/23", "the IETF protocol assignments range (RFC 2928)"),
    ("5f00::/16", "the SRv6 SID range (RFC 9602)"),
    ("fc00::/7", "the unique local range (RFC 4193)"),
    ("fe80::/10", "the link-local range (RFC 4291)"),
    ("fec0::/10", "the deprecated site-local range (RFC 3879)"),
    ("ff00::/8", "the multicast range (RFC 4291)"),
]
# Inside 2001::/23 these are globally reachable (IANA registry).
_GLOBAL_EXCEPTIONS_V6 = [
    ipaddress.ip_network(n)
    for n in ("2001:1::1/128", "2001:1::2/128", "2001:3::/32", "2001:4:112::/48", "2001:20::/28", "2001:30::/28")
]


def _compile(table: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    compiled = []
    for cidr, words in table:
        net = ipaddress.ip_network(cidr)
        compiled.append((int(net.network_address), int(net.netmask), words))
    return compiled


_RESERVED = {4: _compile(_RESERVED_V4), 6: _compile(_RESERVED_V6)}


def reserved_range(ip: IPAddress) -> str | None:
    """Name the non-global range holding ``ip``, or ``None`` for a public address."""
    value = int(ip)
    for network, mask, words in _RESERVED[ip.version]:
        if value & mask == network:
            if ip.version == 6 and any(ip in net for net in _GLOBAL_EXCEPTIONS_V6):
                return None
            return words
    return None


def require_public(ip: IPAddress) -> IPAddress:
    """Raise ``reserved_address`` (422) for a non-global address."""
    words = reserved_range(ip)
    if words is not None:
        raise ApiError("reserved_address", f"{ip} is in {words}; it has no public data")
    return ip


def parse_public_ip(text: str) -> IPAddress:
    """:func:`parse_ip`, then :func:`require_public`; memoised like ``parse_ip``
    (the reserved-range check walks a score of ranges)."""
    if type(text) is str and 0 < len(text) <= _MAX_IP_TEXT:
        return _parse_public_ip_cached(text)
    return require_public(_parse_ip(text))


@functools.lru_cache(maxsize=8192)
def _parse_public_ip_cached(text: str) -> IPAddress:
    return require_public(_parse_ip_cached(text))


# Domain names -----------------------------------------------------------------

# Underscores are accepted: names such as _dmarc.example.com carry real TXT
# records, and a DNS API that refused them would be useless for mail checks.
# Used with fullmatch: "$" also matches before a final newline, so "com\n" would pass as a label.
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_DOMAIN_INPUT = 1024  # bound the work idna does on hostile input


def parse_domain(text: str) -> str:
    """Validate a domain name and return its lower-case A-label form without the root dot.

    The rules of docs/API.md#addresses-and-domain-names: case-insensitive,
    one trailing dot allowed, IDN converted to punycode (IDNA 2008 with UTS 46
    mapping), at most 253 characters and 63 per label. A name whose last
    label is all digits is refused: no such top-level domain can exist
    (RFC 3696 2) and it is nearly always an IP address sent to the wrong route.
    """
    if not isinstance(text, str) or not text or len(text) > _MAX_DOMAIN_INPUT:
        raise ApiError("invalid_domain", f"{_show(text)} is not a valid domain name")
    name = text[:-1] if text.endswith(".") else text
    if not name:
        raise ApiError("invalid_domain", "the root name '.' cannot be looked up here")
    if name.isascii():
        name = name.lower()
    else:
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            raise ApiError("invalid_domain", f"{_show(text)} is not a valid internationalised domain name") from None
    labels = name.split(".")
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise ApiError("invalid_domain", f"{_show(text)} is not a valid domain name (bad label {_show(label, 40)})")
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError, ValueError):
                raise ApiError("invalid_domain", f"{_show(text)} holds an invalid punycode label") from None
    if len(name) > 253:
        raise ApiError("invalid_domain", f"{_show(text)} is longer than 253 characters")
    if labels[-1].isdigit():
        raise ApiError(
            "invalid_domain",
            f"{_show(text)} is not a domain name (its last label is numeric); use /dns/<ip>/reverse for addresses",
        )
    return name


# asplain (RFC 5396): "AS13335" or "13335", any case, 32-bit. Matched with fullmatch on ASCII digits only
# (str.isdigit would let "١٣٣" through, and int() would read it).
_ASN = re.compile(r"(?:[Aa][Ss])?([0-9]{1,10})")
MAX_ASN = 2**32 - 1


def parse_asn(text: str) -> int:
    """An autonomous system number as a client wrote it (``AS13335``, ``as13335`` or ``13335``); raise
    ``invalid_asn`` otherwise (docs/API.md#as-record). asdot (``1.10``), signs, spaces and numbers past
    32 bits are refused. Whether the number is assigned is the registries' answer, not ours."""
    match = _ASN.fullmatch(text) if isinstance(text, str) and len(text) <= 12 else None
    if match is None:
        raise ApiError("invalid_asn", f"{_show(text)} is not an AS number; write it AS13335 or 13335")
    number = int(match.group(1))
    if number > MAX_ASN:
        raise ApiError("invalid_asn", f"{_show(text)} is out of range: AS numbers are at most {MAX_ASN} (32 bits)")
    return number
