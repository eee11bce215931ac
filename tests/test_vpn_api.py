"""``GET /ip/{ip}/vpn`` through the app: verdicts for each kind of address, with every
source local (feeds from a local HTTP server, ``.mmdb`` fixtures, a local DNS server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ipintel.settings import Settings
from tests.support import feeds as f
from tests.support.app import running_app
from tests.support.dns_server import DnsServer
from tests.support.feeds import FeedServer, wait_for_feeds
from tests.support.mmdb import write_mmdb

# AS data of the test world: realistic holders for each address family.
ASN_WORLD = {
    "3.5.140.0/22": {"autonomous_system_number": 16509, "autonomous_system_organization": "Amazon.com, Inc."},
    "2600:1f14::/35": {"autonomous_system_number": 16509, "autonomous_system_organization": "Amazon.com, Inc."},
    "37.19.200.0/24": {"autonomous_system_number": 9009, "autonomous_system_organization": "M247 Europe SRL"},
    "172.58.0.0/16": {"autonomous_system_number": 21928, "autonomous_system_organization": "T-Mobile USA, Inc."},
    "81.2.69.0/24": {"autonomous_system_number": 20712, "autonomous_system_organization": "Andrews & Arnold Ltd"},
}
ANONYMOUS_WORLD = {
    "146.70.0.0/16": {"is_anonymous": True, "is_anonymous_vpn": True, "is_hosting_provider": True},
    "73.1.2.3/32": {"is_anonymous": True, "is_residential_proxy": True},
}
CONNECTION_WORLD = {
    "172.58.0.0/16": {"connection_type": "Cellular"},
    "81.2.69.0/24": {"connection_type": "Cable/DSL"},
}
RESIDENTIAL = "81.2.69.160"
MOBILE = "172.58.1.1"


@pytest.fixture(scope="module")
def world_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("vpn-world")
    return {
        "geoip_asn_db": write_mmdb(base / "asn.mmdb", "GeoLite2-ASN", ASN_WORLD),
        "geoip_anonymous_db": write_mmdb(base / "anonymous.mmdb", "GeoIP2-Anonymous-IP", ANONYMOUS_WORLD),
        "geoip_connection_db": write_mmdb(base / "connection.mmdb", "GeoIP2-Connection-Type", CONNECTION_WORLD),
    }


@pytest.fixture
def world(settings: Settings, world_dbs: dict[str, Path], dns: DnsServer, feed_server: FeedServer) -> Settings:
    return settings.replace(feeds_enabled=True, feed_urls=feed_server.feed_urls(), dns_servers=dns.servers, **world_dbs)


@contextlib.asynccontextmanager
async def app_with_feeds(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running_app(settings) as http:
        await wait_for_feeds(http, "ok")
        yield http


async def vpn(http: httpx.AsyncClient, address: str) -> dict[str, Any]:
    response = await http.get(f"/ip/{address}/vpn")
    assert response.status_code == 200, response.text
    return response.json()["data"]


def flags(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("isVpn", "isProxy", "isHosting", "isMobile", "isTor", "confidence")}


def relay_and_provider(record: dict[str, Any]) -> tuple[bool, str | None]:
    return record["isRelay"], record["provider"]


async def test_verdicts_for_each_kind_of_address(world: Settings) -> None:
    async with app_with_feeds(world) as http:
        tor = await vpn(http, f.TOR_EXIT)
        assert tor["ip"] == f.TOR_EXIT
        assert flags(tor) == {"isVpn": True, "isProxy": True, "isHosting": False, "isMobile": False, "isTor": True,
                              "confidence": "high"}  # fmt: skip
        assert tor["reasons"] == ["tor-exit"]
        assert relay_and_provider(tor) == (False, None)  # the Tor list names no operator

        cloud = await vpn(http, f.AWS_ADDRESS)
        assert flags(cloud) == {"isVpn": False, "isProxy": False, "isHosting": True, "isMobile": False, "isTor": False,
                                "confidence": "medium"}  # fmt: skip
        assert cloud["reasons"] == ["cloud:aws", "datacenter:x4bnet", "asn-hosting:AS16509"]
        assert relay_and_provider(cloud) == (False, "AWS us-east-1")  # the published ranges, before the AS

        cloud6 = await vpn(http, f.AWS_V6_ADDRESS)
        assert cloud6["isHosting"] and cloud6["reasons"] == ["cloud:aws", "asn-hosting:AS16509"]
        assert cloud6["provider"] == "AWS us-east-1"

        for address, reason, provider in [
            (f.GCP_ADDRESS, "cloud:gcp", "Google Cloud us-central1"),
            (f.AZURE_ADDRESS, "cloud:azure", "Azure westeurope"),
            (f.ORACLE_ADDRESS, "cloud:oracle", "Oracle Cloud us-phoenix-1"),
            (f.CLOUDFLARE_ADDRESS, "cloud:cloudflare", "Cloudflare"),
            (f.DIGITALOCEAN_ADDRESS, "cloud:digitalocean", "DigitalOcean"),
            (f.DATACENTER_ADDRESS, "datacenter:x4bnet", None),
        ]:
            record = await vpn(http, address)
            assert (record["isHosting"], record["isVpn"], record["reasons"]) == (True, False, [reason]), address
            assert relay_and_provider(record) == (False, provider), address

        vpn_range = await vpn(http, f.VPN_RANGE_ADDRESS)  # a VPN network inside M247, a hosting AS
        assert flags(vpn_range) == {"isVpn": True, "isProxy": False, "isHosting": True, "isMobile": False,
                                    "isTor": False, "confidence": "medium"}  # fmt: skip
        assert vpn_range["reasons"] == ["vpn-range:x4bnet", "datacenter:x4bnet", "asn-hosting:AS9009"]
        assert vpn_range["provider"] == "M247"  # only the AS list names an operator here

        # Listed alone on X4BNet's list: a third-party aggregate's inference, evidence about the network.
        server = await vpn(http, f.VPN_SERVER_ADDRESS)
        assert (server["isVpn"], server["confidence"], server["reasons"]) == (True, "medium", ["vpn-range:x4bnet"])

        mobile = await vpn(http, MOBILE)
        assert flags(mobile) == {"isVpn": False, "isProxy": False, "isHosting": False, "isMobile": True,
                                 "isTor": False, "confidence": "medium"}  # fmt: skip
        assert mobile["reasons"] == ["connection-type:cellular", "asn-mobile:AS21928"]
        assert mobile["provider"] == "T-Mobile US"

        residential = await vpn(http, RESIDENTIAL)
        assert flags(residential) == {"isVpn": False, "isProxy": False, "isHosting": False, "isMobile": False,
                                      "isTor": False, "confidence": "medium"}  # fmt: skip
        assert residential["reasons"] == []
        assert relay_and_provider(residential) == (False, None)

        anonymous = await vpn(http, "146.70.5.5")
        assert (anonymous["isVpn"], anonymous["isHosting"], anonymous["confidence"]) == (True, True, "high")
        assert anonymous["reasons"] == ["anonymous-db:vpn", "anonymous-db:hosting"]

        proxy = await vpn(http, "73.1.2.3")
        assert (proxy["isProxy"], proxy["isVpn"], proxy["isTor"]) == (True, True, False)
        assert anonymous["provider"] is None  # the Anonymous-IP database names no operator

        # iCloud Private Relay: a relay, and on that evidence nothing else (docs/API.md#vpn-detection).
        for address in (f.RELAY_ADDRESS, f.RELAY_V6_ADDRESS):
            relay = await vpn(http, address)
            assert flags(relay) == {"isVpn": False, "isProxy": False, "isHosting": False, "isMobile": False,
                                    "isTor": False, "confidence": "medium"}, address  # fmt: skip
            assert relay_and_provider(relay) == (True, "iCloud Private Relay"), address
            assert relay["reasons"] == ["relay:icloud"], address
        # A relay block that a third-party VPN list also holds (IPv4 and IPv6): Apple's own list wins.
        for address in (f.RELAY_ON_VPN_LIST_ADDRESS, f.RELAY_V6_ON_VPN_LIST_ADDRESS):
            both = await vpn(http, address)
            assert (both["isRelay"], both["isVpn"], both["isProxy"], both["confidence"]) == (
                True,
                False,
                False,
                "medium",
            )
            assert both["reasons"] == ["vpn-range:x4bnet", "relay:icloud"], address  # the overruled listing shown
            assert both["provider"] == "iCloud Private Relay", address

        # A VPN provider's own server: exact, named, ahead of the hosting AS and the third-party /24.
        nord = await vpn(http, f.NORDVPN_SERVER_ADDRESS)
        assert flags(nord) == {"isVpn": True, "isProxy": False, "isHosting": True, "isMobile": False, "isTor": False,
                               "confidence": "high"}  # fmt: skip
        assert nord["reasons"] == ["vpn-server:nordvpn", "vpn-range:x4bnet", "datacenter:x4bnet", "asn-hosting:AS9009"]
        assert nord["provider"] == "NordVPN"
        # Not listed, but in a /24 where NordVPN publishes servers: its network, not its server.
        subnet = await vpn(http, f.NORDVPN_SUBNET_ADDRESS)
        assert (subnet["isVpn"], subnet["confidence"], subnet["provider"]) == (True, "medium", "NordVPN")
        assert subnet["reasons"] == ["vpn-subnet:nordvpn"]
        # A /24 two providers rent servers in is neither's network; their servers still are theirs.
        shared = await vpn(http, f.SHARED_SUBNET_ADDRESS)
        assert (shared["isVpn"], shared["reasons"], shared["provider"]) == (False, [], None)
        pia = await vpn(http, f.SHARED_SUBNET[0])
        assert (pia["isVpn"], pia["confidence"], pia["reasons"]) == (True, "high", ["vpn-server:pia"])
        assert pia["provider"] == "Private Internet Access"
        mullvad = await vpn(http, f.MULLVAD_V6_SERVER_ADDRESS)
        assert (mullvad["isVpn"], mullvad["confidence"], mullvad["provider"]) == (True, "high", "Mullvad")
        assert mullvad["reasons"] == ["vpn-server:mullvad"]

        # IPv4-mapped IPv6 is the IPv4 address (docs/API.md#addresses-and-domain-names).
        assert (await vpn(http, f"::ffff:{f.TOR_EXIT}"))["ip"] == f.TOR_EXIT


async def test_reverse_dns_keywords_are_the_weakest_signal(world: Settings, dns: DnsServer) -> None:
    dns.add_ptr("81.2.69.161", "vpn-7.example.net")
    dns.add_ptr("81.2.69.162", "tor-exit-2.example.org")
    async with app_with_feeds(world) as http:
        keyword = await vpn(http, "81.2.69.161")
        assert (keyword["isVpn"], keyword["confidence"], keyword["reasons"]) == (True, "low", ["ptr:vpn"])
        tor = await vpn(http, "81.2.69.162")
        assert (tor["isTor"], tor["isProxy"], tor["confidence"], tor["reasons"]) == (
            True,
            True,
            "low",
            ["ptr:tor-exit"],
        )
        # A PTR keyword next to a primary list: the list decides the confidence.
        dns.add_ptr(f.TOR_EXIT, "tor-exit-1.example.org")
        both = await vpn(http, f.TOR_EXIT)
        assert (both["confidence"], both["reasons"]) == ("high", ["tor-exit", "ptr:tor-exit"])


async def test_every_source_down_still_answers_with_low_confidence(settings: Settings, tmp_path: Path) -> None:
    down = settings.replace(
        feeds_enabled=True,
        feed_urls={spec: "http://127.0.0.1:9/feed" for spec in f.world()},  # nothing listens there
        geoip_anonymous_db=tmp_path / "absent-anonymous.mmdb",
        geoip_connection_db=tmp_path / "absent-connection.mmdb",
    )
    async with running_app(down) as http:
        intel = http.app.state.intel
        async with asyncio.timeout(10):  # every download fails fast; wait until each has been tried
            while any(state.failures == 0 for state in intel.feeds.feeds.values()):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        for address in (f.TOR_EXIT, f.AWS_ADDRESS, RESIDENTIAL):
            record = await vpn(http, address)
            assert flags(record) == {"isVpn": False, "isProxy": False, "isHosting": False, "isMobile": False,
                                     "isTor": False, "confidence": "low"}  # fmt: skip
            assert record["reasons"] == []
        ready = await http.get("/readyz")
        assert ready.status_code == 200  # readiness does not depend on feeds
        checks = ready.json()["data"]["checks"]
        assert checks["feed_tor"]["status"] == "missing" and checks["feed_tor"]["error"]
        assert checks["geoip_anonymous"]["status"] == "unavailable"


async def test_restart_without_network_reuses_the_snapshots(world: Settings, feed_server: FeedServer) -> None:
    addresses = [f.TOR_EXIT, f.AWS_ADDRESS, f.VPN_RANGE_ADDRESS, RESIDENTIAL, f.RELAY_ADDRESS]
    async with app_with_feeds(world) as http:
        before = [await vpn(http, a) for a in addresses]
    await feed_server.stop()  # the network is gone; the same data directory remains

    async with running_app(world) as http:
        await wait_for_feeds(http, "ok")  # from the snapshots, without a single download
        after = [await vpn(http, a) for a in addresses]
        intel = http.app.state.intel
        assert all(state.fetched_at is not None for state in intel.feeds.feeds.values())
    assert after == before
    assert after[0]["confidence"] == "high" and after[3]["confidence"] == "medium"
    assert after[1]["provider"] == "AWS us-east-1" and after[4]["isRelay"] is True


async def test_a_stale_feed_lowers_a_negative_verdict(world: Settings) -> None:
    async with app_with_feeds(world) as http:
        assert (await vpn(http, RESIDENTIAL))["confidence"] == "medium"
    snapshot = world.data_dir / "feeds" / "tor.txt"
    lines = snapshot.read_text().splitlines()
    meta = json.loads(lines[1].removeprefix("#"))
    meta["fetchedAt"] -= 4 * 3600  # the Tor list is stale after 3 hours
    snapshot.write_text("\n".join([lines[0], "# " + json.dumps(meta), *lines[2:]]) + "\n")

    async with running_app(world.replace(feeds_enabled=False)) as http:
        intel = http.app.state.intel
        await asyncio.wait_for(intel.feeds.snapshots_loaded.wait(), 10)
        assert intel.feed_health()["tor"]["status"] == "stale"
        assert (await vpn(http, RESIDENTIAL))["confidence"] == "low"
        assert (await vpn(http, f.TOR_EXIT))["confidence"] == "high"  # stale data still counts as evidence


async def test_a_disabled_feed_does_not_lower_confidence(world: Settings) -> None:
    urls = {**world.feed_urls, "oracle": None}
    async with running_app(world.replace(feed_urls=urls)) as http:
        intel = http.app.state.intel
        async with asyncio.timeout(20):
            while not intel.feeds.complete():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        assert intel.feed_health()["oracle"]["status"] == "disabled"
        oracle = await vpn(http, f.ORACLE_ADDRESS)
        assert (oracle["isHosting"], oracle["confidence"]) == (False, "medium")


@pytest.mark.parametrize(
    ("address", "status", "code"),
    [
        ("10.0.0.1", 422, "reserved_address"),
        ("192.0.2.1", 422, "reserved_address"),
        ("fe80::1", 422, "reserved_address"),
        ("not-an-ip", 400, "invalid_ip"),
        ("1.2.3.4.5", 400, "invalid_ip"),
        ("fe80::1%25eth0", 400, "invalid_ip"),
    ],
)
async def test_bad_addresses(settings: Settings, address: str, status: int, code: str) -> None:
    async with running_app(settings) as http:
        response = await http.get(f"/ip/{address}/vpn")
        assert response.status_code == status
        assert response.json()["error"]["code"] == code


async def test_the_route_is_documented(settings: Settings) -> None:
    async with running_app(settings) as http:
        document = (await http.get("/openapi.json")).json()
        operation = document["paths"]["/ip/{ip}/vpn"]["get"]
        assert operation["operationId"] == "detectVpn"
        assert set(operation["responses"]) >= {"200", "400", "422"}
        assert "VpnDetection" == document["components"]["schemas"]["vpn"]["title"]
