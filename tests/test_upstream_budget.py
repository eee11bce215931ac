"""Issue 23, point 1 and the first target: one request's upstream queries are bounded by the caller's tokens,
in every route and tool, REST and MCP, single or batched (docs/API.md#profile-and-batch, #rate-limits).

The fake DNS server (tests/support/dns_server.py) counts every query it receives: Team Cymru's origin and
AS-name TXT queries, the PTR queries of VPN detection and of the ptr part. No ASN database is configured, so
the AS of every address is Team Cymru's, as on a server without one.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from ipintel.capabilities.cymru import origin_name
from ipintel.infra.limiter import Quota
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.dns_server import DnsServer
from tests.support.mcp import call_tool, post

ZONE = "asn.cymru.test"
# Addresses of the fixture City database's networks and beyond: every one distinct, none cached.
ADDRESSES = [f"12.0.{i // 200}.{i % 200 + 1}" for i in range(60)]  # 12.0.0.0/16: Chicago


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    """Team Cymru answers every address of ADDRESSES (an origin per address, so no answer covers another's)
    and each has a VPN-looking PTR name: everything that could be asked, answers."""
    for ip in [*ADDRESSES, "8.8.8.8"]:
        dns.add(origin_name(ipaddress.ip_address(ip), ZONE), "TXT", f"64500 | {ip}/32 | GB | ripencc |")
        dns.add_ptr(ip, f"vpn-{ip.replace('.', '-')}.example.net")
    dns.add(f"AS64500.{ZONE}", "TXT", "64500 | GB | ripencc | 2001-01-01 | EXAMPLE - Example Ltd, GB")
    return dns


@pytest.fixture
def cymru_settings(settings: Settings, dns: DnsServer) -> Settings:
    return settings.replace(geoip_asn_db=None, dns_servers=dns.servers, cymru_zone=ZONE)


def asked(dns: DnsServer) -> int:
    """Queries about client addresses: all but the DNSBL self-tests the server runs in the background."""
    return sum(not q.name.startswith(("2.0.0.127.", "1.0.0.127.")) for q in list(dns.queries))


def queries(dns: DnsServer) -> dict[str, int]:
    return {"cymru": dns.count(ZONE, suffix=True), "ptr": dns.count(rtype="PTR"), "all": asked(dns)}


async def test_a_batch_of_geo_and_vpn_asks_no_upstream(cymru_settings: Settings, dns: DnsServer) -> None:
    """Today's code sent one PTR and up to four Team Cymru queries per address for one general token."""
    async with running_app(cymru_settings) as client:
        answer = await client.post("/ip/batch", json={"ips": ADDRESSES, "include": ["geo", "vpn"]})
        assert answer.status_code == 200
        results = answer.json()["data"]["results"]
        assert queries(dns)["all"] == 0, queries(dns)
        # It says what it did not consult, in the verdict (a reason, and a negative is only low) and the profile.
        data = results[0]["data"]
        assert data["notConsulted"] == ["ptr", "team-cymru"]
        assert data["vpn"]["reasons"][-2:] == ["unchecked:ptr", "unchecked:team-cymru"]
        assert data["vpn"]["isVpn"] is False and data["vpn"]["confidence"] == "low"
        assert data["geo"]["asn"] is None

        # The single route consults everything, for its one token: one PTR, one origin, one name query.
        single = (await client.get(f"/ip/{ADDRESSES[0]}/vpn")).json()["data"]
        assert "ptr:vpn" in single["reasons"] and not any(r.startswith("unchecked:") for r in single["reasons"])
        assert queries(dns) == {"cymru": 2, "ptr": 1, "all": 3}
        # Once it is known, a batch answers the full verdict from the cache, and the AS from Team Cymru's cache.
        again = (await client.post("/ip/batch", json={"ips": ADDRESSES[:1]})).json()["data"]["results"][0]["data"]
        assert again["vpn"] == single and again["geo"]["asn"] == "AS64500" and "notConsulted" not in again
        assert queries(dns)["all"] == 3


async def test_an_mcp_batch_of_lookup_ips_calls_asks_no_upstream(cymru_settings: Settings, dns: DnsServer) -> None:
    """A JSON-RPC batch of 20 lookup_ips calls is 21 general tokens; it caused 20 x 60 PTR queries."""
    calls = [
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "lookup_ips", "arguments": {"ips": ADDRESSES[n::20]}},
        }
        for n in range(20)
    ]
    async with running_app(cymru_settings) as client:
        response = await post(client, calls)
        answers = response.json()
        assert len(answers) == 20 and all(not a["result"]["isError"] for a in answers), answers[0]
    assert queries(dns)["all"] == 0, queries(dns)


async def test_a_profile_asks_team_cymru_once_for_its_geo_and_vpn(cymru_settings: Settings, dns: DnsServer) -> None:
    """geo and vpn are asked at once: without a single flight both asked Team Cymru (2 origin + 2 name)."""
    async with running_app(cymru_settings) as client:
        rest = await client.get(f"/ip/{ADDRESSES[1]}/profile", params={"include": "geo,vpn"})
        assert rest.status_code == 200 and rest.json()["data"]["geo"]["asn"] == "AS64500"
        assert "notConsulted" not in rest.json()["data"]
        assert queries(dns) == {"cymru": 2, "ptr": 1, "all": 3}
        tool = await call_tool(client, "profile_ip", {"ip": ADDRESSES[2], "include": ["geo", "vpn"]})
        assert tool["structuredContent"]["vpn"]["reasons"] == ["ptr:vpn"]
        assert queries(dns) == {"cymru": 3, "ptr": 2, "all": 5}  # the AS name is known now


@pytest.mark.parametrize("tool", [False, True], ids=["rest", "mcp"])
async def test_a_batchs_paid_parts_ask_no_more_than_their_tokens(
    cymru_settings: Settings, dns: DnsServer, tool: bool
) -> None:
    """include ptr: one dns token per address. Past the tokens the part is rate_limited without asking the
    bucket again (today: one refused spend, a Redis round trip with IPINTEL_REDIS_URL, per address)."""
    limited = cymru_settings.replace(rate_limits={Quota.GENERAL: 100, Quota.DNS: 5, Quota.REGISTRY: 10})
    async with running_app(limited) as client:
        body: dict[str, Any] = {"ips": ADDRESSES[:30], "include": ["ptr"]}
        if tool:
            results = (await call_tool(client, "lookup_ips", body))["structuredContent"]["results"]
        else:
            results = (await client.post("/ip/batch", json=body)).json()["data"]["results"]
        limiter = client.app.state.limiter
    codes = [entry["data"]["ptr"].get("error", {}).get("code") for entry in results]
    assert codes.count(None) == 5 and codes.count("rate_limited") == 25
    assert queries(dns) == {"cymru": 0, "ptr": 5, "all": 5}
    assert limiter.rejections[Quota.DNS] == 1  # one refusal, then the batch knew


async def test_every_route_and_tool_stays_within_a_bound_per_token(cymru_settings: Settings, dns: DnsServer) -> None:
    """Each address-taking route and tool once, on a fresh address: the DNS queries it causes are at most three
    per token it spends (a GeoIP record: Team Cymru's origin and name; a verdict: those and one PTR)."""
    cases: list[tuple[str, str, dict[str, Any] | None, int]] = [
        ("/ip/{ip}", "lookup_ip", {}, 1),
        ("/ip/{ip}/vpn", "detect_vpn", {}, 1),
        ("/ip/{ip}/profile?include=geo,vpn,ptr", "profile_ip", {"include": ["geo", "vpn", "ptr"]}, 2),
        ("/dns/{ip}/reverse", "lookup_dns", None, 2),  # the route's dns token (the tool: general + dns)
    ]
    fresh = iter(ADDRESSES[10:])
    async with running_app(cymru_settings) as client:
        for path, name, arguments, tokens in cases:
            for via_tool in (False, True):
                ip = next(fresh)
                before = asked(dns)
                if via_tool:
                    args = {"ip": ip, **(arguments or {})}
                    result = await call_tool(client, name, args)
                    assert not result["isError"], result
                else:
                    response = await client.get(path.replace("{ip}", ip))
                    assert response.status_code == 200, response.text
                count = asked(dns) - before
                assert 1 <= count <= 3 * tokens, (path, via_tool, count)


async def test_a_batch_of_a_thousand_fresh_addresses_is_answered_locally(
    cymru_settings: Settings, dns: DnsServer
) -> None:
    ips = [f"12.0.{i // 250}.{i % 250 + 1}" for i in range(1000)]
    async with running_app(cymru_settings) as client:
        response = await client.post("/ip/batch", json={"ips": ips, "include": ["geo", "vpn"]}, timeout=30)
        results = response.json()["data"]["results"]
    assert len(results) == 1000 and all("data" in entry for entry in results)
    assert asked(dns) == 0
