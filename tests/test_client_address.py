"""The caller's address (docs/API.md#client-address): the socket peer, unless a trusted proxy names the client.

Forwarding headers are written by whoever sends the request; only the part
a trusted proxy appended can be believed. These tests pin that rule on the
function and through the app (``/ip`` and the rate limiter use one answer).
"""

from __future__ import annotations

import ipaddress

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from ipintel.settings import Settings
from ipintel.web.client import client_address
from tests.support.app import running_app
from tests.support.clock import FakeClock

PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("2001:db8:ffff::/48"))


def headers(*pairs: tuple[str, str]) -> Headers:
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


def resolve(peer: str | None, *pairs: tuple[str, str], proxies=PROXIES) -> str | None:
    ip = client_address(peer, headers(*pairs), proxies)
    return str(ip) if ip is not None else None


# Untrusted peers: headers change nothing -----------------------------------------------


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    assert resolve("8.8.8.8", ("X-Forwarded-For", "1.2.3.4"), proxies=()) == "8.8.8.8"
    assert resolve("8.8.8.8", ("Forwarded", "for=1.2.3.4"), proxies=()) == "8.8.8.8"


def test_spoofed_forwarding_headers_from_an_untrusted_peer_are_ignored() -> None:
    assert resolve("8.8.8.8", ("X-Forwarded-For", "10.1.1.1, 1.2.3.4")) == "8.8.8.8"
    assert resolve("8.8.8.8", ("Forwarded", "for=1.2.3.4")) == "8.8.8.8"
    assert resolve("2001:4860::1", ("X-Forwarded-For", "1.2.3.4")) == "2001:4860::1"


@given(st.text(max_size=200))
def test_no_header_text_from_an_untrusted_peer_changes_the_answer(text: str) -> None:
    value = text.encode("latin-1", "replace").decode("latin-1").replace("\r", "").replace("\n", "")
    assert resolve("198.51.100.9", ("X-Forwarded-For", value), ("Forwarded", value)) == "198.51.100.9"


def test_peer_forms() -> None:
    assert resolve("::ffff:8.8.8.8", proxies=()) == "8.8.8.8"  # IPv4-mapped is the IPv4 address
    assert resolve("2001:4860:0:0::1", proxies=()) == "2001:4860::1"  # canonical
    assert resolve(None, ("X-Forwarded-For", "1.2.3.4")) is None  # no peer (Unix socket)
    assert resolve("not-an-address") is None


# Trusted proxies: the right-most address that is not a proxy -----------------------------


def test_a_trusted_proxy_names_the_client() -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", "1.2.3.4")) == "1.2.3.4"


def test_right_most_untrusted_address_wins_over_what_the_client_wrote() -> None:
    # The client wrote "6.6.6.6"; our proxy appended the address it saw.
    assert resolve("10.0.0.5", ("X-Forwarded-For", "6.6.6.6, 1.2.3.4")) == "1.2.3.4"


def test_chained_trusted_proxies_are_skipped() -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", "6.6.6.6, 1.2.3.4, 10.9.9.9, 10.8.8.8")) == "1.2.3.4"


def test_several_header_lines_form_one_chain() -> None:
    chain = (("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "1.2.3.4, 10.1.1.1"))
    assert resolve("10.0.0.5", *chain) == "1.2.3.4"


def test_a_chain_of_only_proxies_gives_the_left_most_proxy() -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", "10.1.1.1, 10.2.2.2")) == "10.1.1.1"


def test_no_header_from_a_trusted_proxy_gives_the_proxy() -> None:
    assert resolve("10.0.0.5") == "10.0.0.5"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.2.3.4:5678", "1.2.3.4"),  # a port
        ("[2001:4860::1]:443", "2001:4860::1"),  # bracketed IPv6 with a port
        ("2001:4860::1", "2001:4860::1"),
        (" 1.2.3.4 ", "1.2.3.4"),
        ("::ffff:1.2.3.4", "1.2.3.4"),
        ("2001:4860:0:0::1", "2001:4860::1"),
    ],
)
def test_forwarded_for_address_forms(value: str, expected: str) -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", value)) == expected


@pytest.mark.parametrize(
    "chain",
    [
        "1.2.3.4, garbage",
        "1.2.3.4, unknown",
        "1.2.3.4, 999.1.1.1",
        "1.2.3.4, fe80::1%eth0",  # a zone id names an interface of someone's machine
        "1.2.3.4, " + "9" * 5000,
    ],
)
def test_a_garbled_hop_stops_the_walk_at_the_last_verified_proxy(chain: str) -> None:
    """Past a hop we cannot read we cannot tell who wrote what: answer the proxy
    that handed us the chain, never an address to the left of the garbage."""
    assert resolve("10.0.0.5", ("X-Forwarded-For", chain)) == "10.0.0.5"
    assert resolve("10.0.0.5", ("X-Forwarded-For", chain + ", 10.1.1.1")) == "10.1.1.1"


def test_empty_items_are_skipped() -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", "1.2.3.4,, ,")) == "1.2.3.4"


# Forwarded (RFC 7239) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"),
        ('for="[2001:4860:cafe::17]:4711"', "2001:4860:cafe::17"),
        ('for="[2001:4860:cafe::17]"', "2001:4860:cafe::17"),
        ('for="198.51.100.17:8080"', "198.51.100.17"),
        ("For=198.51.100.17", "198.51.100.17"),  # parameter names are case-insensitive
        ("for = 198.51.100.17", "198.51.100.17"),
        ("for=6.6.6.6, for=198.51.100.17", "198.51.100.17"),
        ("for=198.51.100.17, for=10.3.3.3;proto=https", "198.51.100.17"),
        ("proto=https;for=198.51.100.17;host=example.com", "198.51.100.17"),
    ],
)
def test_forwarded_header(value: str, expected: str) -> None:
    assert resolve("10.0.0.5", ("Forwarded", value)) == expected


@pytest.mark.parametrize("value", ["for=unknown", "for=_hidden", 'for="_gazonk"', "for=", "for=300.1.1.1"])
def test_obfuscated_or_broken_forwarded_gives_the_proxy(value: str) -> None:
    assert resolve("10.0.0.5", ("Forwarded", "for=6.6.6.6, " + value)) == "10.0.0.5"


def test_x_forwarded_for_is_preferred_when_both_are_sent() -> None:
    both = (("X-Forwarded-For", "1.2.3.4"), ("Forwarded", "for=5.6.7.8"))
    assert resolve("10.0.0.5", *both) == "1.2.3.4"


def test_ipv6_trusted_proxy() -> None:
    assert resolve("2001:db8:ffff::1", ("X-Forwarded-For", "2001:4860::8")) == "2001:4860::8"


@given(st.text(max_size=300))
def test_any_header_from_a_trusted_proxy_gives_an_address(text: str) -> None:
    value = text.encode("latin-1", "replace").decode("latin-1").replace("\r", "").replace("\n", "")
    for name in ("X-Forwarded-For", "Forwarded"):
        answer = resolve("10.0.0.5", (name, value))
        assert answer is not None
        ip = ipaddress.ip_address(answer)
        assert "%" not in answer and not (ip.version == 6 and ip.ipv4_mapped)


# Through the app: /ip and the limiter see the same caller ---------------------------------


async def test_own_address_through_a_trusted_proxy(settings: Settings) -> None:
    trusting = settings.replace(trusted_proxies=(ipaddress.ip_network("203.0.113.0/24"),))
    async with running_app(trusting, client=("203.0.113.7", 4000)) as client:
        response = await client.get("/ip", headers={"X-Forwarded-For": "6.6.6.6, 8.8.8.8"})
    assert response.status_code == 200
    assert response.json()["data"]["ip"] == "8.8.8.8"


async def test_own_address_ignores_forwarding_from_an_untrusted_peer(settings: Settings) -> None:
    trusting = settings.replace(trusted_proxies=(ipaddress.ip_network("203.0.113.0/24"),))
    async with running_app(trusting, client=("8.8.4.4", 4000)) as client:
        response = await client.get("/ip", headers={"X-Forwarded-For": "8.8.8.8"})
    assert response.json()["data"]["ip"] == "8.8.4.4"


async def test_limiter_and_own_address_agree(settings: Settings) -> None:
    """The bucket /ip spends from is the one of the address /ip reports."""
    trusting = settings.replace(
        trusted_proxies=(ipaddress.ip_network("203.0.113.0/24"),),
        rate_limits={"general": 2, "dns": 30, "registry": 10},
    )
    async with running_app(trusting, client=("203.0.113.7", 4000), clock=FakeClock()) as client:
        limiter = client.app.state.limiter
        for _ in range(2):
            response = await client.get("/ip", headers={"X-Forwarded-For": "8.8.8.8"})
            assert response.json()["data"]["ip"] == "8.8.8.8"
        refused = await client.get("/ip", headers={"X-Forwarded-For": "8.8.8.8"})
        other = await client.get("/ip", headers={"X-Forwarded-For": "8.8.4.4"})
    assert refused.status_code == 429
    assert other.status_code == 200
    assert limiter.take("8.8.8.8", "general").allowed is False


async def test_unknown_peer_is_an_error_not_a_crash(settings: Settings) -> None:
    async with running_app(settings) as client:
        app = client.app
        transport = httpx.ASGITransport(app=app, client=("not-an-ip", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://ipintel.test") as other:
            response = await other.get("/ip")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_ip"
