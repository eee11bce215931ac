"""Team Cymru's DNS interface as the ASN source: parsing, caching, failures, and
the GeoIP record with and without an ASN database."""

from __future__ import annotations

import ipaddress
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipintel.capabilities.asn import AsnInfo
from ipintel.capabilities.cymru import (
    CymruAsnSource,
    Origin,
    organisation,
    origin_name,
    parse_as_name,
    parse_origin,
)
from ipintel.infra.resolver import Resolver
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.clock import FakeClock
from tests.support.dns_server import DnsServer

ZONE = "asn.cymru.test"
ip = ipaddress.ip_address


# Parsing ---------------------------------------------------------------------


def test_origin_names() -> None:
    assert origin_name(ip("8.8.4.4"), "asn.cymru.com") == "4.4.8.8.origin.asn.cymru.com"
    assert origin_name(ip("2001:4860::8888"), "asn.cymru.com") == (
        "8.8.8.8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.8.4.1.0.0.2.origin6.asn.cymru.com"
    )


def test_origin_takes_the_most_specific_prefix_then_the_first_asn() -> None:
    texts = [
        "3356 | 8.0.0.0/9 | US | arin | 1992-12-01",
        "15169 36040 | 8.8.8.0/24 | US | arin | 2023-12-28",
        "garbage",
        "x | not-a-prefix | US | arin | 2020-01-01",
        "64500 | 2001:db8::/32 | ZZ | ripencc | 2020-01-01",  # the other family
        "64501 | 9.9.9.0/24 | US | arin | 2020-01-01",  # does not cover the address
    ]
    assert parse_origin(texts, ip("8.8.8.8")) == Origin(15169, ipaddress.ip_network("8.8.8.0/24"))
    assert parse_origin(["| 8.8.8.0/24 | US"], ip("8.8.8.8")) is None
    assert parse_origin(["²³ | 8.8.8.0/24 | US"], ip("8.8.8.8")) is None  # digits, but not ASCII ones
    assert parse_origin([], ip("8.8.8.8")) is None


def test_as_name_field() -> None:
    assert parse_as_name(["15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US"], 15169) == (
        "GOOGLE - Google LLC, US"
    )
    assert parse_as_name(["15169 | US | arin | 2000-03-30 | A | B, US"], 15169) == "A | B, US"
    assert parse_as_name(["13335 | US | arin | 2010-07-14 | CLOUDFLARENET, US"], 15169) is None
    assert parse_as_name(["15169 | US | arin"], 15169) is None


@pytest.mark.parametrize(
    ("as_name", "org"),
    [
        ("GOOGLE - Google LLC, US", "Google LLC"),
        ("CLOUDFLARENET - Cloudflare, Inc., US", "Cloudflare, Inc."),
        ("NTT-COMMUNICATIONS-2914 - NTT America, Inc., US", "NTT America, Inc."),
        ("GOOGLE - Google LLC", "Google LLC"),
        ("LEVEL3, US", "LEVEL3"),
        ("AMAZON-02, US", "AMAZON-02"),
        ("DTAG Internet service provider operations, DE", "DTAG Internet service provider operations"),
        ("HANDLE - Part one - part two, GB", "Part one - part two"),
        ("HANDLE - , FR", "HANDLE"),
        ("-Reserved AS-, ZZ", None),
        ("", None),
        (None, None),
    ],
)
def test_organisation_from_the_as_name(as_name: str | None, org: str | None) -> None:
    assert organisation(as_name) == org


# The source against a local DNS server ---------------------------------------------


def cymru_zone(server: DnsServer) -> DnsServer:
    """Team Cymru's answers for Google's 8.8.8.0/24 and 2001:4860::/32 and Cloudflare's 1.1.1.0/24.

    TTL 0, so that c-ares's own response cache stays out of the way and the
    query counts show what the source's caches do."""
    for address in ("8.8.8.8", "8.8.8.200"):
        server.add(origin_name(ip(address), ZONE), "TXT", "15169 | 8.8.8.0/24 | US | arin | 2023-12-28", ttl=0)
    server.add(
        origin_name(ip("2001:4860::8888"), ZONE), "TXT", "15169 | 2001:4860::/32 | US | arin | 2005-03-14", ttl=0
    )
    server.add(origin_name(ip("1.1.1.1"), ZONE), "TXT", "13335 | 1.1.1.0/24 | AU | apnic | 2011-08-11", ttl=0)
    server.add(f"AS15169.{ZONE}", "TXT", "15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US", ttl=0)
    server.add(f"AS13335.{ZONE}", "TXT", "13335 | US | arin | 2010-07-14 | CLOUDFLARENET - Cloudflare, Inc., US", ttl=0)
    return server


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    return cymru_zone(dns)


async def test_lookup_and_per_prefix_per_asn_caching(dns: DnsServer, resolver: Resolver) -> None:
    source = CymruAsnSource(resolver, ZONE)

    assert await source.lookup(ip("8.8.8.8")) == AsnInfo(15169, "Google LLC")
    assert await source.lookup(ip("8.8.8.200")) == AsnInfo(15169, "Google LLC")  # same prefix: cached
    assert await source.lookup(ip("2001:4860::8888")) == AsnInfo(15169, "Google LLC")  # same ASN: name cached
    assert await source.lookup(ip("1.1.1.1")) == AsnInfo(13335, "Cloudflare, Inc.")

    assert dns.count(suffix=True, name=f"origin.{ZONE}") == 2
    assert dns.count(suffix=True, name=f"origin6.{ZONE}") == 1
    assert dns.count(f"AS15169.{ZONE}", "TXT") == 1
    assert dns.count(f"AS13335.{ZONE}", "TXT") == 1
    assert resolver.stats.calls[("cymru", "ok")] == 5


async def test_unannounced_address_is_none_and_remembered(dns: DnsServer, resolver: Resolver) -> None:
    source = CymruAsnSource(resolver, ZONE)
    assert await source.lookup(ip("203.0.113.5")) is None
    assert await source.lookup(ip("203.0.113.5")) is None
    assert dns.count(origin_name(ip("203.0.113.5"), ZONE)) == 1


async def test_failures_give_none_and_are_not_cached(dns: DnsServer, resolver: Resolver) -> None:
    dns.servfail(origin_name(ip("9.9.9.9"), ZONE))
    source = CymruAsnSource(resolver, ZONE)

    assert await source.lookup(ip("9.9.9.9")) is None
    first = dns.count(origin_name(ip("9.9.9.9"), ZONE))
    assert await source.lookup(ip("9.9.9.9")) is None
    assert dns.count(origin_name(ip("9.9.9.9"), ZONE)) > first  # asked again


async def test_a_failed_name_lookup_keeps_the_number(dns: DnsServer, resolver: Resolver) -> None:
    dns.add(origin_name(ip("4.2.2.2"), ZONE), "TXT", "3356 | 4.0.0.0/9 | US | arin | 1992-12-01")
    dns.blackhole(f"AS3356.{ZONE}")
    source = CymruAsnSource(resolver, ZONE, timeout=0.2)

    started = time.perf_counter()
    assert await source.lookup(ip("4.2.2.2")) == AsnInfo(3356, None)
    assert time.perf_counter() - started < 10  # a bound on a hang, not a measurement: the 0.2 s timeout ended it


async def test_entries_expire_after_a_day(dns: DnsServer, resolver: Resolver) -> None:
    now = [0.0]
    source = CymruAsnSource(resolver, ZONE, clock=lambda: now[0])
    await source.lookup(ip("8.8.8.8"))
    now[0] = 24 * 3600 - 1
    await source.lookup(ip("8.8.8.8"))
    assert dns.count(origin_name(ip("8.8.8.8"), ZONE)) == 1

    now[0] = 24 * 3600 + 1
    await source.lookup(ip("8.8.8.8"))
    assert dns.count(origin_name(ip("8.8.8.8"), ZONE)) == 2


async def test_caches_are_bounded(dns: DnsServer, resolver: Resolver) -> None:
    source = CymruAsnSource(resolver, ZONE, max_entries=2)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"):
        await source.lookup(ip(address))
    assert len(source._unannounced) <= 2


# The GeoIP record ----------------------------------------------------------------------


async def test_geoip_uses_the_asn_database_when_configured(settings: Settings, dns: DnsServer) -> None:
    async with running_app(settings.replace(dns_servers=dns.servers, cymru_zone=ZONE)) as client:
        response = await client.get("/ip/8.8.8.8")
    data = response.json()["data"]
    assert (data["asn"], data["org"], data["isp"]) == ("AS15169", "Google LLC", "Google LLC")
    assert dns.count(ZONE, suffix=True) == 0


async def test_geoip_falls_back_to_team_cymru(settings: Settings, dns: DnsServer) -> None:
    cymru = settings.replace(geoip_asn_db=None, dns_servers=dns.servers, cymru_zone=ZONE)
    async with running_app(cymru) as client:
        google = (await client.get("/ip/8.8.8.8")).json()["data"]
        v6 = (await client.get("/ip/2001:4860::8888")).json()["data"]
    assert (google["asn"], google["org"], google["isp"]) == ("AS15169", "Google LLC", "Google LLC")
    assert google["country"] == "US"
    assert v6["asn"] == "AS15169"


@pytest.mark.parametrize("failure", ["servfail", "blackhole"])
async def test_geoip_succeeds_with_null_asn_fields_when_cymru_fails(
    settings: Settings, dns: DnsServer, failure: str
) -> None:
    getattr(dns, failure)(ZONE)
    cymru = settings.replace(geoip_asn_db=None, dns_servers=dns.servers, cymru_zone=ZONE, dns_timeout=0.3)
    async with running_app(cymru) as client:
        started = time.perf_counter()
        response = await client.get("/ip/8.8.8.8")
    assert response.status_code == 200
    data = response.json()["data"]
    assert (data["asn"], data["org"], data["isp"]) == (None, None, None)
    assert data["city"] == "Mountain View"
    assert time.perf_counter() - started < 10  # a bound on a hang: the 0.3 s DNS timeout ended the lookup


# Cymru's TXT strings are input from the network: no text may make parsing raise.

_cymru_like = st.lists(
    st.one_of(st.text(max_size=40), st.sampled_from(["15169", "8.8.8.0/24", "2001:4860::/32", "US", " - ", ", US"])),
    max_size=6,
).map(" | ".join)


@given(texts=st.lists(_cymru_like, max_size=4))
def test_parsing_never_raises(texts: list[str]) -> None:
    origin = parse_origin(texts, ip("8.8.8.8"))
    assert origin is None or ip("8.8.8.8") in origin.prefix
    name = parse_as_name(texts, 15169)
    org = organisation(name)
    assert org is None or (org.strip() == org and org)


async def test_record_without_asn_is_kept_only_five_minutes(settings) -> None:
    """A GeoIP record whose ASN lookup failed must not pin null ASN fields for 24 h."""
    clock = FakeClock()
    with DnsServer() as dns:
        dns.servfail("asn.cymru.com")
        configured = settings.replace(geoip_asn_db=None, dns_servers=dns.servers, dns_timeout=0.3)
        async with running_app(configured, clock=clock) as client:
            first = (await client.get("/ip/8.8.8.8")).json()["data"]
            dns.clear()
            dns.add("8.8.8.8.origin.asn.cymru.com", "TXT", ["15169 | 8.8.8.0/24 | US | arin | 2023-12-28"], ttl=0)
            dns.add("AS15169.asn.cymru.com", "TXT", ["15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US"], ttl=0)
            clock.advance(60)
            cached = (await client.get("/ip/8.8.8.8")).json()["data"]
            clock.advance(301)
            refreshed = (await client.get("/ip/8.8.8.8")).json()["data"]
    assert first["asn"] is None and cached["asn"] is None
    assert refreshed["asn"] == "AS15169" and refreshed["org"] == "Google LLC"
