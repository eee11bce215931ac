from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipintel.addresses import canonical, parse_domain, parse_ip, reserved_range
from ipintel.errors import ApiError


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("8.8.8.8", "8.8.8.8"),
        ("2001:4860:4860:0000:0000:0000:0000:8888", "2001:4860:4860::8888"),
        ("2001:DB8::1", "2001:db8::1"),
        ("::ffff:8.8.8.8", "8.8.8.8"),
        ("::FFFF:0808:0808", "8.8.8.8"),
    ],
)
def test_canonical_forms(text: str, canonical: str) -> None:
    assert str(parse_ip(text)) == canonical


@pytest.mark.parametrize(
    ("given_ip", "expected"),
    [
        ("::ffff:8.8.8.8", "8.8.8.8"),
        ("::ffff:0:0", "0.0.0.0"),
        ("8.8.8.8", "8.8.8.8"),
        ("2001:db8::1", "2001:db8::1"),
        ("::8.8.8.8", "::808:808"),  # IPv4-compatible (deprecated), not mapped: stays IPv6
        ("64:ff9b::808:808", "64:ff9b::808:808"),  # NAT64 is another host's address, not a spelling of this one
    ],
)
def test_canonical_unwraps_an_ipv4_mapped_address_and_nothing_else(given_ip: str, expected: str) -> None:
    ip = ipaddress.ip_address(given_ip)
    assert canonical(ip) == ipaddress.ip_address(expected)
    assert canonical(canonical(ip)) == canonical(ip)


@given(st.ip_addresses())
def test_every_address_round_trips(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    parsed = parse_ip(str(ip))
    assert parsed == (ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip)


@given(st.text(max_size=60))
def test_random_text_is_an_address_or_invalid_ip(text: str) -> None:
    try:
        parse_ip(text)
    except ApiError as error:
        assert error.code == "invalid_ip"


def test_public_addresses_are_not_reserved() -> None:
    for text in ("8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2606:4700::1111", "2001:20::1", "100.63.255.255"):
        assert reserved_range(parse_ip(text)) is None, text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Example.COM", "example.com"),
        ("example.com.", "example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("_dmarc.example.com", "_dmarc.example.com"),
        ("com", "com"),
        ("ÉXAMPLE.de", "xn--xample-9ua.de"),
    ],
)
def test_domains(text: str, expected: str) -> None:
    assert parse_domain(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "example..com",
        "-example.com",
        "example-.com",
        "exa mple.com",
        "a" * 64 + ".com",
        ".".join(["a" * 63] * 4) + ".com",
        "example.com..",
        "8.8.8.8",
        "xn--zz.example",
        "ex@mple.com",
        "x" * 5000,
        "\u0000.com",
    ],
)
def test_bad_domains(text: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_domain(text)
    assert info.value.code == "invalid_domain"


@pytest.mark.parametrize("text", ["example.com", "_dmarc.example.com", "com"])
def test_a_trailing_newline_is_refused_like_a_trailing_space(text: str) -> None:
    # Python's "$" also matches before a final "\n": "example.com\n" once passed, newline included.
    for suffix in (" ", "\n"):
        with pytest.raises(ApiError) as info:
            parse_domain(text + suffix)
        assert info.value.code == "invalid_domain", repr(suffix)
