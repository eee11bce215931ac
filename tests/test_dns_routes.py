"""``/dns/{domain}`` and ``/dns/{ip}/reverse`` through the ASGI app, against a real
DNS server on 127.0.0.1. Every response is checked against its schema by
``running_app``."""

from __future__ import annotations

import time

import pytest

from ipintel.settings import Settings
from tests.support.app import running_app, server_process
from tests.support.dns_server import DnsServer


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    dns.add("example.com", "A", "93.184.215.14", ttl=3600)
    dns.add("example.com", "AAAA", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", ttl=3600)
    dns.add("example.com", "MX", "10 mx1.example.com")
    dns.add("example.com", "MX", "20 mx2.example.com")
    dns.add("example.com", "NS", "a.iana-servers.net")
    dns.add("example.com", "NS", "b.iana-servers.net")
    dns.add("example.com", "TXT", ["v=spf1 ", "-all"])
    dns.add("example.com", "TXT", "google-site-verification=abc")
    dns.add("www.example.com", "CNAME", "cdn.example.net")
    dns.add("cdn.example.net", "CNAME", "edge.example.net")
    dns.add("edge.example.net", "A", "198.51.100.10", ttl=60)
    dns.add("xn--bcher-kva.example", "A", "192.0.2.80")
    dns.add_ptr("8.8.8.8", "dns.google", ttl=3600)
    dns.add_ptr("2001:4860:4860::8888", "dns.google.")
    dns.add_ptr("10.0.0.1", "router.lan")
    dns.servfail("broken.example")
    dns.refuse("refused.example")
    dns.blackhole("silent.example")
    return dns


async def get_records(settings: Settings, path: str) -> list[dict]:
    async with running_app(settings) as client:
        response = await client.get(path)
    assert response.status_code == 200, response.text
    return response.json()["data"]["records"]


async def test_a_records_by_default(dns_settings: Settings) -> None:
    assert await get_records(dns_settings, "/dns/example.com") == [
        {"name": "example.com", "type": "A", "ttl": 3600, "data": "93.184.215.14"}
    ]


@pytest.mark.parametrize(
    ("rtype", "expected"),
    [
        ("AAAA", ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"]),
        ("mx", ["10 mx1.example.com", "20 mx2.example.com"]),
        ("Ns", ["a.iana-servers.net", "b.iana-servers.net"]),
        ("TXT", ["google-site-verification=abc", "v=spf1 -all"]),
    ],
)
async def test_every_record_type_case_insensitive(dns_settings: Settings, rtype: str, expected: list[str]) -> None:
    records = await get_records(dns_settings, f"/dns/example.com?type={rtype}")
    assert sorted(r["data"] for r in records) == expected
    assert {(r["name"], r["type"]) for r in records} == {("example.com", rtype.upper())}


async def test_cname_chain_is_listed_before_the_final_records(dns_settings: Settings) -> None:
    assert await get_records(dns_settings, "/dns/www.example.com?type=A") == [
        {"name": "www.example.com", "type": "CNAME", "ttl": 300, "data": "cdn.example.net"},
        {"name": "cdn.example.net", "type": "CNAME", "ttl": 300, "data": "edge.example.net"},
        {"name": "edge.example.net", "type": "A", "ttl": 60, "data": "198.51.100.10"},
    ]


async def test_cname_query_returns_only_the_alias(dns_settings: Settings) -> None:
    assert await get_records(dns_settings, "/dns/www.example.com?type=CNAME") == [
        {"name": "www.example.com", "type": "CNAME", "ttl": 300, "data": "cdn.example.net"}
    ]


async def test_idn_is_looked_up_and_answered_in_a_label_form(dns_settings: Settings, dns: DnsServer) -> None:
    records = await get_records(dns_settings, "/dns/Bücher.example.")
    assert records == [{"name": "xn--bcher-kva.example", "type": "A", "ttl": 300, "data": "192.0.2.80"}]
    assert dns.count("xn--bcher-kva.example", "A") == 1
    assert all(name.isascii() for name in dns.names())


async def test_nodata_is_200_with_no_records(dns_settings: Settings) -> None:
    assert await get_records(dns_settings, "/dns/example.com?type=CNAME") == []


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/dns/missing.example.com", 404, "domain_not_found"),
        ("/dns/broken.example?type=MX", 502, "upstream_error"),
        ("/dns/refused.example", 502, "upstream_error"),
        ("/dns/-bad-.example", 400, "invalid_domain"),
        ("/dns/" + "a" * 64 + ".example", 400, "invalid_domain"),
        ("/dns/8.8.8.8", 400, "invalid_domain"),
        ("/dns/example.com?type=PTR", 400, "invalid_record_type"),
        ("/dns/example.com?type=ANY", 400, "invalid_record_type"),
        ("/dns/" + "x" * 5000, 400, "invalid_domain"),
        ("/dns/not-an-ip/reverse", 400, "invalid_ip"),
        ("/dns/fe80::1%25eth0/reverse", 400, "invalid_ip"),
    ],
)
async def test_errors_are_mapped(dns_settings: Settings, path: str, status: int, code: str) -> None:
    async with running_app(dns_settings) as client:
        response = await client.get(path)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_a_silent_server_answers_504_near_the_timeout(dns_settings: Settings) -> None:
    async with running_app(dns_settings) as client:
        started = time.perf_counter()
        response = await client.get("/dns/silent.example?type=TXT")
        elapsed = time.perf_counter() - started
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert 0.4 < elapsed < dns_settings.dns_timeout * 20  # not before the timeout; the upper bound is on a hang


async def test_no_dns_server_listening_is_a_quick_502(settings: Settings) -> None:
    # The settings fixture points DNS at a closed local port.
    async with running_app(settings.replace(dns_timeout=10.0)) as client:
        started = time.perf_counter()
        response = await client.get("/dns/example.com")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_error"
    assert time.perf_counter() - started < 10.0  # before the timeout could have ended it


async def test_reverse_ipv4(dns_settings: Settings) -> None:
    async with running_app(dns_settings) as client:
        response = await client.get("/dns/8.8.8.8/reverse")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "ip": "8.8.8.8",
        "records": [{"name": "8.8.8.8.in-addr.arpa", "type": "PTR", "ttl": 3600, "data": "dns.google"}],
    }


async def test_reverse_ipv6_uses_the_nibble_name_and_canonical_address(dns_settings: Settings) -> None:
    async with running_app(dns_settings) as client:
        response = await client.get("/dns/2001:4860:4860:0:0:0:0:8888/reverse")
    data = response.json()["data"]
    assert data["ip"] == "2001:4860:4860::8888"
    assert data["records"] == [
        {
            "name": "8.8.8.8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.8.4.0.6.8.4.1.0.0.2.ip6.arpa",
            "type": "PTR",
            "ttl": 300,
            "data": "dns.google",
        }
    ]


async def test_reverse_accepts_private_and_mapped_addresses(dns_settings: Settings) -> None:
    async with running_app(dns_settings) as client:
        private = await client.get("/dns/10.0.0.1/reverse")
        mapped = await client.get("/dns/::ffff:8.8.8.8/reverse")
    assert [r["data"] for r in private.json()["data"]["records"]] == ["router.lan"]
    assert mapped.json()["data"]["ip"] == "8.8.8.8"
    assert [r["data"] for r in mapped.json()["data"]["records"]] == ["dns.google"]


async def test_reverse_without_ptr_is_an_empty_list(dns_settings: Settings) -> None:
    async with running_app(dns_settings) as client:
        response = await client.get("/dns/192.0.2.99/reverse")
    assert response.status_code == 200
    assert response.json()["data"] == {"ip": "192.0.2.99", "records": []}


async def test_reverse_upstream_failures_are_mapped(dns_settings: Settings, dns: DnsServer) -> None:
    dns.servfail("1.0.51.198.in-addr.arpa")
    dns.blackhole("2.0.51.198.in-addr.arpa")
    async with running_app(dns_settings) as client:
        servfail = await client.get("/dns/198.51.0.1/reverse")
        timeout = await client.get("/dns/198.51.0.2/reverse")
    assert (servfail.status_code, servfail.json()["error"]["code"]) == (502, "upstream_error")
    assert (timeout.status_code, timeout.json()["error"]["code"]) == (504, "upstream_timeout")


async def test_dns_routes_are_in_the_openapi_document(settings: Settings) -> None:
    async with running_app(settings) as client:
        document = (await client.get("/openapi.json")).json()
    lookup = document["paths"]["/dns/{domain}"]["get"]
    reverse = document["paths"]["/dns/{ip}/reverse"]["get"]
    assert {"400", "404", "502", "504"} <= set(lookup["responses"])
    assert [p["name"] for p in lookup["parameters"]] == ["domain", "type"]
    assert {"400", "502", "504"} <= set(reverse["responses"])


def test_real_server_reads_dns_servers_with_a_port_from_the_environment(city_db, dns: DnsServer) -> None:
    """``make run`` configuration: IPINTEL_DNS_SERVERS as host:port, through hypercorn."""
    env = {
        "IPINTEL_GEOIP_CITY_DB": str(city_db),
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": dns.env,
        "IPINTEL_DNS_TIMEOUT": "0.5",
        "IPINTEL_DNSBL_ZONES": "bl.invalid",
    }
    with server_process(env) as (client, _proc):
        mx = client.get("/dns/example.com", params={"type": "MX"})
        ptr = client.get("/dns/8.8.8.8/reverse")
        started = time.perf_counter()
        silent = client.get("/dns/silent.example")
        elapsed = time.perf_counter() - started
    assert [r["data"] for r in mx.json()["data"]["records"]] == ["10 mx1.example.com", "20 mx2.example.com"]
    assert [r["data"] for r in ptr.json()["data"]["records"]] == ["dns.google"]
    assert silent.status_code == 504 and elapsed < 10  # the 0.5 s timeout; the upper bound is on a hang
