"""``GET /blacklist/{ip}`` through the ASGI app (docs/API.md#blacklist, #errors; docs/CONFIGURATION.md).

The app runs with its lifespan (so the RFC 5782 self-tests start as in
production), its DNS pointed at the test DNS server and its reputation
database at a local API server; ``running_app`` validates every response
against ``schemas/blacklist.json`` or the error schema.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from ipintel.app import create_app
from ipintel.capabilities import blacklist
from ipintel.settings import ConfigError, Settings
from tests.support.app import running_app
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import answers_everything, healthy_list, query_name
from tests.support.reputation_server import SFS_CLEAN, ReputationServer

LISTED_IP = "45.33.32.156"
CLEAN_IP = "8.8.8.8"
SFS_LISTED = {"success": 1, "ip": {"appears": 1, "frequency": 9, "lastseen": "2024-05-01 10:00:00", "confidence": 61.2}}


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    healthy_list(dns, "zen.spamhaus.org", listed={LISTED_IP: ["127.0.0.2", "127.0.0.4"]})
    healthy_list(dns, "bl.spamcop.net", listed={LISTED_IP: "127.0.0.2"})
    return dns


@pytest.fixture
def bl_settings(settings: Settings, dns: DnsServer, api: ReputationServer) -> Settings:
    return settings.replace(
        dns_servers=dns.servers,
        dns_timeout=0.5,
        dnsbl_zones=("zen.spamhaus.org", "bl.spamcop.net"),
        reputation_url=api.url("/api"),
        blacklist_deadline=1.5,
    )


async def test_listed_address(bl_settings: Settings, api: ReputationServer) -> None:
    api.respond(body=SFS_LISTED)
    async with running_app(bl_settings) as client:
        response = await client.get(f"/blacklist/{LISTED_IP}")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["ip"] == LISTED_IP and data["status"] == "listed" and data["listed"] is True
    spamhaus, spamcop, sfs = data["sources"]
    assert spamhaus == {
        "name": "zen.spamhaus.org",
        "status": "listed",
        "listed": True,
        "detail": "SBL: spam source or spam operation (127.0.0.2); XBL: exploited or infected host (127.0.0.4)",
    }
    assert spamcop["status"] == "listed" and spamcop["listed"] is True
    assert sfs["name"] == "stopforumspam.com" and sfs["status"] == "listed"
    assert "reported 9 times" in sfs["detail"]
    assert api.requests[-1].query["ip"] == LISTED_IP


async def test_clean_address_is_clear_only_when_every_source_answered(bl_settings: Settings) -> None:
    async with running_app(bl_settings) as client:
        data = (await client.get(f"/blacklist/{CLEAN_IP}")).json()["data"]
    assert data == {
        "ip": CLEAN_IP,
        "status": "clear",
        "listed": False,
        "sources": [
            {"name": "zen.spamhaus.org", "status": "clear", "listed": False},
            {"name": "bl.spamcop.net", "status": "clear", "listed": False},
            {"name": "stopforumspam.com", "status": "clear", "listed": False},
        ],
    }
    assert blacklist.is_definitive(data)


async def test_public_resolver_and_reputation_error_give_unknown(settings: Settings, api: ReputationServer) -> None:
    api.respond(body={"success": 0, "error": "invalid ip"})
    with DnsServer() as dns:
        answers_everything(dns, "zen.spamhaus.org", "127.255.255.254")
        healthy_list(dns, "bl.spamcop.net")
        configured = settings.replace(
            dns_servers=dns.servers, dnsbl_zones=("zen.spamhaus.org", "bl.spamcop.net"), reputation_url=api.url("/api")
        )
        async with running_app(configured) as client:
            data = (await client.get(f"/blacklist/{CLEAN_IP}")).json()["data"]
    spamhaus, spamcop, sfs = data["sources"]
    assert spamhaus["status"] == "unavailable" and spamhaus["listed"] is None
    assert "127.255.255.254" in spamhaus["detail"] and "public or open resolver" in spamhaus["detail"]
    assert spamcop["status"] == "clear"
    assert sfs["status"] == "unavailable" and "invalid ip" in sfs["detail"]
    assert data["status"] == "unknown" and data["listed"] is False
    assert not blacklist.is_definitive(data)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/blacklist/2001:4860:4860::8888", 400, "ipv6_not_supported"),
        ("/blacklist/fe80::1", 400, "ipv6_not_supported"),
        ("/blacklist/10.0.0.1", 422, "reserved_address"),
        ("/blacklist/127.0.0.2", 422, "reserved_address"),
        ("/blacklist/198.51.100.7", 422, "reserved_address"),
        ("/blacklist/not-an-ip", 400, "invalid_ip"),
        ("/blacklist/1.2.3.4%25eth0", 400, "invalid_ip"),
        ("/blacklist/1.2.3", 400, "invalid_ip"),
        ("/blacklist/" + "9" * 500, 400, "invalid_ip"),
    ],
)
async def test_bad_input_gets_a_spec_error(
    bl_settings: Settings, dns: DnsServer, path: str, status: int, code: str
) -> None:
    async with running_app(bl_settings) as client:
        response = await client.get(path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert not any(CLEAN_IP in name or "4.3.2.1" in name for name in dns.names())


async def test_reserved_address_message_names_the_range(bl_settings: Settings) -> None:
    async with running_app(bl_settings) as client:
        response = await client.get("/blacklist/192.168.1.1")
    assert "private range (RFC 1918)" in response.json()["error"]["message"]


async def test_ipv4_mapped_ipv6_is_checked_as_ipv4(bl_settings: Settings) -> None:
    async with running_app(bl_settings) as client:
        response = await client.get(f"/blacklist/::ffff:{LISTED_IP}")
    assert response.status_code == 200
    assert response.json()["data"]["ip"] == LISTED_IP
    assert response.json()["data"]["status"] == "listed"


async def test_spamhaus_dqs_key_switches_zone_and_never_leaks(settings: Settings, api: ReputationServer) -> None:
    key = "abcdef0123456789abcdef0123"
    with DnsServer() as dns:
        healthy_list(dns, f"{key}.zen.dq.spamhaus.net", listed={LISTED_IP: "127.0.0.3"})
        answers_everything(dns, "zen.spamhaus.org", "127.255.255.254")  # the public zone must not be asked
        configured = settings.replace(
            dns_servers=dns.servers,
            dnsbl_zones=("zen.spamhaus.org",),
            spamhaus_dqs_key=key,
            reputation_url=api.url("/api"),
        )
        async with running_app(configured) as client:
            response = await client.get(f"/blacklist/{LISTED_IP}")
        asked = dns.names()
    assert key not in response.text
    (spamhaus, _sfs) = response.json()["data"]["sources"]
    assert spamhaus == {
        "name": "zen.dq.spamhaus.net",
        "status": "listed",
        "listed": True,
        "detail": "SBL CSS: snowshoe spam source (127.0.0.3)",
    }
    assert query_name(LISTED_IP, f"{key}.zen.dq.spamhaus.net") in asked
    assert not any(name.endswith("zen.spamhaus.org") for name in asked)


async def test_abuseipdb_replaces_stopforumspam_when_keyed(bl_settings: Settings, api: ReputationServer) -> None:
    api.respond(body={"data": {"ipAddress": LISTED_IP, "abuseConfidenceScore": 93, "totalReports": 120}})
    configured = bl_settings.replace(abuseipdb_key="secret-key", abuseipdb_url=api.url("/api/v2/check"))
    async with running_app(configured) as client:
        response = await client.get(f"/blacklist/{LISTED_IP}")
    reputation = response.json()["data"]["sources"][-1]
    assert reputation == {
        "name": "abuseipdb.com",
        "status": "listed",
        "listed": True,
        "detail": "abuse confidence score 93/100 (listed from 50), 120 reports in 90 days",
    }
    assert "secret-key" not in response.text
    assert api.requests[-1].path == "/api/v2/check" and api.requests[-1].headers["Key"] == "secret-key"


async def test_self_tests_start_with_the_app_and_catch_a_dead_list(settings: Settings, api: ReputationServer) -> None:
    with DnsServer() as dns:
        healthy_list(dns, "healthy.test")
        answers_everything(dns, "dead.test", "127.0.0.2")
        configured = settings.replace(
            dns_servers=dns.servers, dnsbl_zones=("healthy.test", "dead.test"), reputation_url=api.url("/api")
        )
        async with running_app(configured) as client:
            # No request yet: the lifespan alone starts the self-tests.
            ends = time.perf_counter() + 30  # a bound on a hang: the loop ends when the verdict is in
            tests = client.app.state.intel.dnsbl_tests
            dead_zone = next(z for z in tests.zones if z.name == "dead.test")
            # Wait for the verdict, not the query: the server logs a query
            # before the self-test has read its answer.
            while tests.state(dead_zone) is None:
                assert time.perf_counter() < ends, "the self-tests did not start"
                await asyncio.sleep(0.01)
            assert dns.count(query_name("127.0.0.2", "healthy.test")) == 1
            data = (await client.get(f"/blacklist/{CLEAN_IP}")).json()["data"]
            dead_queries = dns.count(suffix=True, name="dead.test")
    healthy, dead, _sfs = data["sources"]
    assert healthy["status"] == "clear"
    assert dead["status"] == "unavailable"
    assert dead["detail"].startswith("failed its RFC 5782 self-test") and "lists everything" in dead["detail"]
    assert data["status"] == "unknown"
    # A zone that failed its self-test is not asked about the address.
    assert dns.count(query_name(CLEAN_IP, "dead.test")) == 0 and dead_queries == 2


async def test_answer_never_waits_past_the_deadline(settings: Settings, api: ReputationServer) -> None:
    api.respond(body=SFS_CLEAN, delay=5.0)
    with DnsServer() as dns:
        healthy_list(dns, "healthy.test")
        dns.blackhole("silent.test")
        deadline = 0.6
        configured = settings.replace(
            dns_servers=dns.servers,
            dns_timeout=5.0,
            upstream_timeout=5.0,
            dnsbl_zones=("healthy.test", "silent.test"),
            reputation_url=api.url("/api"),
            blacklist_deadline=deadline,
        )
        async with running_app(configured) as client:
            started = time.perf_counter()
            response = await client.get(f"/blacklist/{CLEAN_IP}")
            elapsed = time.perf_counter() - started
    assert elapsed < 5.0, elapsed  # before the 5 s source or DNS timeout could end it: the deadline did
    healthy, silent, sfs = response.json()["data"]["sources"]
    assert healthy["status"] == "clear"
    assert silent["status"] == "unavailable" and sfs["status"] == "unavailable"
    assert "0.6 s" in sfs["detail"]
    assert response.json()["data"]["status"] == "unknown"


def test_unusable_zone_configuration_stops_the_app(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="IPINTEL_DNSBL_ZONES"):
        create_app(settings.replace(dnsbl_zones=("no spaces allowed",)))
    with pytest.raises(ConfigError, match="IPINTEL_SPAMHAUS_DQS_KEY"):
        create_app(settings.replace(spamhaus_dqs_key="key.with.dots"))


async def test_openapi_documents_the_route(bl_settings: Settings) -> None:
    async with running_app(bl_settings) as client:
        document = (await client.get("/openapi.json")).json()
    operation = document["paths"]["/blacklist/{ip}"]["get"]
    assert operation["operationId"] == "checkBlacklist"
    assert "ipv6_not_supported" in operation["responses"]["400"]["description"]
    assert "reserved_address" in operation["responses"]["422"]["description"]
    assert "429" in operation["responses"]


def test_unusable_zone_is_a_configuration_error_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipintel.__main__ import main

    monkeypatch.setenv("IPINTEL_DNSBL_ZONES", "zen.spamhaus.org,not a zone")
    monkeypatch.setenv("IPINTEL_LOG_FORMAT", "text")
    from ipintel import logs

    # main() configures logging for a server before it finds the zone unusable: its handler
    # writes to this test's captured stderr, which is closed after the test. The root logger
    # gets its own handlers and level back, or every later test's INFO line is a logging error.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)

    try:
        assert main([]) == 2
    finally:
        logs.access_log.enabled = False  # main() configured logging for a server; the suite is not one
    assert "configuration error: IPINTEL_DNSBL_ZONES: 'not a zone' is not a DNS zone name" in capsys.readouterr().err
