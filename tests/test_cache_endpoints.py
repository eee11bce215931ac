"""Cache lifetimes per endpoint (docs/API.md#caching) and single flight, through the app,
against real local upstreams: an RDAP server, a DNS server, a reputation API.

Lifetimes run on a :class:`FakeClock`; upstream calls are counted where they
arrive (the local server), so "one upstream call" means one request on a socket.
"""

from __future__ import annotations

import asyncio

import pytest

from ipintel.infra.cache import BLACKLIST_TTL, DNS_MAX_TTL, GEOIP_TTL, INCOMPLETE_TTL, NEGATIVE_TTL, WHOIS_TTL
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.clock import FakeClock
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import healthy_list
from tests.support.mcp import call_tool
from tests.support.rdap_server import RdapServer, Reply, rdap_fixture
from tests.support.reputation_server import ReputationServer

ARIN_IP = "23.45.67.89"


# /whois: 7 days, single flight, RDAP 404 five minutes ------------------------------------


async def test_fifty_concurrent_whois_requests_make_one_upstream_call(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    path = rdap.ip_path("arin", ARIN_IP)
    rdap.set(path, Reply.json(rdap_fixture("arin_v4_2024"), delay=0.3))  # slow: all 50 arrive while it is out
    clock = FakeClock()
    async with running_app(whois_settings, clock=clock) as client:
        responses = await asyncio.gather(*(client.get(f"/whois/{ARIN_IP}") for _ in range(50)))
        assert [r.status_code for r in responses] == [200] * 50
        assert len({r.content for r in responses}) == 1
        assert rdap.hits[path] == 1
        whois = client.app.state.intel.caches["whois"]
        assert whois.stats()["misses"] == 1 and whois.stats()["coalesced"] == 49

        clock.advance(WHOIS_TTL - 1)
        assert (await client.get(f"/whois/{ARIN_IP}")).status_code == 200
        assert rdap.hits[path] == 1
        clock.advance(1)
        assert (await client.get(f"/whois/{ARIN_IP}")).status_code == 200
        assert rdap.hits[path] == 2


async def test_rdap_404_is_cached_five_minutes(whois_settings: Settings, rdap: RdapServer) -> None:
    path = rdap.ip_path("arin", "23.1.1.1")  # unconfigured: the registry's 404
    clock = FakeClock()
    async with running_app(whois_settings, clock=clock) as client:
        for _ in range(3):
            response = await client.get("/whois/23.1.1.1")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "registration_not_found"
        assert rdap.hits[path] == 1
        clock.advance(NEGATIVE_TTL)
        assert (await client.get("/whois/23.1.1.1")).status_code == 404
        assert rdap.hits[path] == 2


@pytest.mark.parametrize("reply", [Reply.server_error(503), Reply.html_429(), Reply.invalid_json()])
async def test_rdap_failures_are_not_cached(whois_settings: Settings, rdap: RdapServer, reply: Reply) -> None:
    path = rdap.ip_path("arin", ARIN_IP)
    rdap.set(path, reply)
    async with running_app(whois_settings, clock=FakeClock()) as client:
        first = await client.get(f"/whois/{ARIN_IP}")
        second = await client.get(f"/whois/{ARIN_IP}")
        assert first.status_code == second.status_code == 502
        assert rdap.hits[path] == 2
        rdap.set(path, Reply.json(rdap_fixture("arin_v4_2024")))  # the registry recovers: answered at once
        assert (await client.get(f"/whois/{ARIN_IP}")).status_code == 200


async def test_failure_during_single_flight_reaches_every_waiter_and_is_not_cached(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    path = rdap.ip_path("arin", ARIN_IP)
    rdap.set(path, Reply(503, b"busy", "text/plain", delay=0.2))
    async with running_app(whois_settings, clock=FakeClock()) as client:
        responses = await asyncio.gather(*(client.get(f"/whois/{ARIN_IP}") for _ in range(20)))
        assert {r.status_code for r in responses} == {502}
        assert rdap.hits[path] == 1
        await client.get(f"/whois/{ARIN_IP}")
        assert rdap.hits[path] == 2


# /dns: 5 minutes, never past the records' TTL; NXDOMAIN five minutes -------------------


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    dns.add("short.example", "A", "192.0.2.10", ttl=30)
    dns.add("long.example", "A", "192.0.2.11", ttl=86400)
    dns.add("volatile.example", "A", "192.0.2.12", ttl=0)
    dns.add("mail.example", "MX", "10 mx.mail.example", ttl=600)
    dns.add_ptr("8.8.8.8", "dns.google", ttl=120)
    dns.servfail("broken.example")
    return dns


async def test_dns_answers_live_no_longer_than_their_ttl(dns_settings: Settings, dns: DnsServer) -> None:
    clock = FakeClock()
    async with running_app(dns_settings, clock=clock) as client:
        cache = client.app.state.intel.caches["dns"]
        short = await client.get("/dns/short.example")
        await client.get("/dns/long.example")
        assert short.json()["data"]["records"][0]["ttl"] == 30
        clock.advance(29)
        await client.get("/dns/short.example")
        await client.get("/dns/long.example")
        assert cache.stats()["hits"] == 2 and cache.stats()["misses"] == 2
        clock.advance(1)  # short.example's 30 s are over; long.example is capped at 5 minutes
        await client.get("/dns/short.example")
        assert cache.stats()["misses"] == 3
        clock.advance(DNS_MAX_TTL - 30 - 1)
        await client.get("/dns/long.example")
        assert cache.stats()["hits"] == 3
        clock.advance(1)
        await client.get("/dns/long.example")
        assert cache.stats()["misses"] == 4


async def test_dns_cache_keys_are_canonical_and_per_type(dns_settings: Settings, dns: DnsServer) -> None:
    async with running_app(dns_settings, clock=FakeClock()) as client:
        cache = client.app.state.intel.caches["dns"]
        for url in ("/dns/mail.example?type=MX", "/dns/MAIL.example.?type=mx", "/dns/mail.example?type=A"):
            assert (await client.get(url)).status_code == 200
        assert cache.stats()["misses"] == 2 and cache.stats()["hits"] == 1


async def test_ttl_zero_is_never_cached(dns_settings: Settings, dns: DnsServer) -> None:
    async with running_app(dns_settings, clock=FakeClock()) as client:
        for _ in range(3):
            assert (await client.get("/dns/volatile.example")).status_code == 200
    assert dns.count("volatile.example", "A") == 3


async def test_nxdomain_is_cached_five_minutes(dns_settings: Settings, dns: DnsServer) -> None:
    clock = FakeClock()
    async with running_app(dns_settings, clock=clock) as client:
        for _ in range(3):
            response = await client.get("/dns/nothing-here.example")
            assert response.status_code == 404 and response.json()["error"]["code"] == "domain_not_found"
        assert dns.count("nothing-here.example", "A") == 1
        clock.advance(NEGATIVE_TTL)
        await client.get("/dns/nothing-here.example")
        assert dns.count("nothing-here.example", "A") == 2


async def test_servfail_is_not_cached(dns_settings: Settings, dns: DnsServer) -> None:
    async with running_app(dns_settings, clock=FakeClock()) as client:
        cache = client.app.state.intel.caches["dns"]
        for _ in range(2):
            assert (await client.get("/dns/broken.example")).status_code == 502
        assert cache.stats()["misses"] == 2 and len(cache) == 0


async def test_reverse_dns_is_cached_within_its_ttl(dns_settings: Settings, dns: DnsServer) -> None:
    clock = FakeClock()
    async with running_app(dns_settings, clock=clock) as client:
        cache = client.app.state.intel.caches["dns"]
        first = await client.get("/dns/8.8.8.8/reverse")
        assert first.json()["data"]["records"][0]["data"].rstrip(".") == "dns.google"
        clock.advance(119)
        await client.get("/dns/8.8.8.8/reverse")
        clock.advance(1)
        await client.get("/dns/8.8.8.8/reverse")
        assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 2


async def test_rest_and_mcp_share_the_dns_cache(dns_settings: Settings, dns: DnsServer) -> None:
    async with running_app(dns_settings, clock=FakeClock()) as client:
        cache = client.app.state.intel.caches["dns"]
        rest = await client.get("/dns/short.example")
        result = await call_tool(client, "lookup_dns", {"domain": "short.example"})
        assert result["structuredContent"] == rest.json()["data"]
        assert cache.stats()["misses"] == 1 and cache.stats()["hits"] == 1


# /blacklist: 1 hour, definitive verdicts only ------------------------------------------


async def test_unavailable_blacklist_verdict_is_not_cached(settings: Settings) -> None:
    # The test settings point DNS and the reputation API at closed ports: every source is unavailable.
    settings = settings.replace(dnsbl_zones=("zen.spamhaus.org",), blacklist_deadline=0.5, dns_timeout=0.2)
    async with running_app(settings, clock=FakeClock()) as client:
        cache = client.app.state.intel.caches["blacklist"]
        for _ in range(2):
            data = (await client.get("/blacklist/8.8.8.8")).json()["data"]
            assert data["status"] == "unknown"
        assert cache.stats()["misses"] == 2 and len(cache) == 0


async def test_definitive_blacklist_verdict_is_cached_one_hour(
    dns_settings: Settings, dns: DnsServer, api: ReputationServer
) -> None:
    clock = FakeClock()
    healthy_list(dns, "bl.spamcop.net")
    configured = dns_settings.replace(
        dnsbl_zones=("bl.spamcop.net",), reputation_url=api.url("/api"), blacklist_deadline=1.5
    )
    async with running_app(configured, clock=clock) as client:
        first = (await client.get("/blacklist/8.8.8.8")).json()["data"]
        assert first["status"] == "clear"
        clock.advance(BLACKLIST_TTL - 1)
        assert (await client.get("/blacklist/8.8.8.8")).json()["data"] == first
        assert len(api.requests) == 1
        clock.advance(1)
        await client.get("/blacklist/8.8.8.8")
        assert len(api.requests) == 2


# /ip/:ip/vpn: in the GeoIP cache -------------------------------------------------------


async def test_vpn_verdicts_live_in_the_geoip_cache_beside_the_records(settings: Settings) -> None:
    clock = FakeClock()
    async with running_app(settings, clock=clock) as client:
        intel = client.app.state.intel
        geoip = intel.caches["geoip"]
        record = await client.get("/ip/8.8.8.8")
        verdict = await client.get("/ip/8.8.8.8/vpn")
        assert record.status_code == verdict.status_code == 200
        assert len(geoip) == 2  # one key namespace each
        await client.get("/ip/8.8.8.8/vpn")
        assert geoip.stats()["hits"] == 1
        # Feeds are off in the tests, so they are missing: the verdict is kept 5 minutes, not 24 h.
        assert not intel.feeds.complete()
        clock.advance(INCOMPLETE_TTL)
        await client.get("/ip/8.8.8.8/vpn")
        await client.get("/ip/8.8.8.8")
        assert geoip.stats()["misses"] == 3 and geoip.stats()["hits"] == 2
        clock.advance(GEOIP_TTL - INCOMPLETE_TTL)
        await client.get("/ip/8.8.8.8")
        assert geoip.stats()["misses"] == 4
