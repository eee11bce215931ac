"""The fake internet's faults, each seen through the service: the app (ASGI, its
lifespan run) is pointed at :class:`FakeInternet` through its settings only, a
fault is switched on, and every route answers what docs/API.md (#errors, #resources) says for it.

This is also the proof that each knob really breaks what it claims to break,
which ``make soak`` and the fuzzing rely on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.fake_internet import ARIN_IP, FAULTS, LISTED_IP, RIPE_IP, FakeInternet
from tests.support.feeds import NORDVPN_SERVER_ADDRESS, VPN_SERVER_ADDRESS, wait_for_feeds

pytestmark = pytest.mark.usefixtures("healthy_net")  # every test starts, and leaves, with no fault on


@pytest.fixture
def base(tmp_path: Path, city_db: Path) -> Settings:
    """No ASN database, so that /ip asks the Cymru zone; feeds fetched from the fake internet."""
    return Settings(
        data_dir=tmp_path / "data",
        geoip_city_db=city_db,
        rate_limits=None,
        log_format="text",
        feeds_enabled=True,
        allowed_hosts=("ipintel.test",),  # the in-process client's name (tests/support/app.py)
    )


def sources(body: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in body["data"]["sources"]}


def test_every_fault_is_named() -> None:
    parts = {"dns", "rdap", "reputation", "feeds"}
    for part in parts:
        assert {f"{part}_slow", f"{part}_down", f"{part}_garbage"} <= set(FAULTS), part


async def test_healthy_internet_answers_every_route(net: FakeInternet, base: Settings) -> None:
    async with running_app(net.settings(base)) as http:
        await wait_for_feeds(http, "ok")
        mx = (await http.get("/dns/example.com", params={"type": "MX"})).json()["data"]["records"]
        assert [r["data"] for r in mx] == ["10 mail.example.com"]
        ptr = (await http.get("/dns/8.8.8.8/reverse")).json()["data"]["records"]
        assert [r["data"] for r in ptr] == ["dns.google"]
        geo = (await http.get("/ip/8.8.8.8")).json()["data"]
        assert geo["asn"] == "AS15169" and geo["isp"]  # from the Cymru zone: no ASN database here
        listed = (await http.get(f"/blacklist/{LISTED_IP}")).json()
        assert listed["data"]["status"] == "listed"
        assert set(sources(listed).values()) <= {"listed", "clear"}
        arin = (await http.get(f"/whois/{ARIN_IP}")).json()["data"]
        ripe = (await http.get(f"/whois/{RIPE_IP}")).json()["data"]
        assert (arin["registry"], ripe["registry"]) == ("ARIN", "RIPE NCC")
        vpn = (await http.get(f"/ip/{NORDVPN_SERVER_ADDRESS}/vpn")).json()["data"]  # on NordVPN's own list
        assert (vpn["isVpn"], vpn["confidence"], vpn["provider"]) == (True, "high", "NordVPN")


@pytest.mark.parametrize("fault", ["dns_down", "dns_garbage"])
async def test_dns_faults(net: FakeInternet, base: Settings, fault: str) -> None:
    """Silence is a timeout (504), a wrong answer an upstream error (502); the blacklist
    check still answers with its DNSBL sources unavailable, and /ip without Cymru data
    answers with null ASN fields (docs/API.md#geoip, #dns, #blacklist)."""
    net.apply(fault)
    expected = {"dns_down": (504, "upstream_timeout"), "dns_garbage": (502, "upstream_error")}[fault]
    async with running_app(net.settings(base.replace(feeds_enabled=False))) as http:
        for path in ("/dns/example.com", "/dns/8.8.8.8/reverse"):
            response = await http.get(path)
            assert (response.status_code, response.json()["error"]["code"]) == expected, path
        blacklist = (await http.get("/blacklist/8.8.8.8")).json()
        assert blacklist["data"]["status"] == "unknown"
        assert sources(blacklist)["healthy.test"] == sources(blacklist)["second.test"] == "unavailable"
        geo = (await http.get("/ip/8.8.8.8")).json()["data"]
        assert (geo["country"], geo["asn"], geo["isp"], geo["org"]) == ("US", None, None, None)


async def test_slow_dns_is_answered_late_but_answered(net: FakeInternet, base: Settings) -> None:
    net.apply("dns_slow")  # 0.15 s, inside the resolver's first try
    async with running_app(net.settings(base.replace(feeds_enabled=False))) as http:
        started = time.monotonic()
        response = await http.get("/dns/example.com")
        assert response.status_code == 200 and response.json()["data"]["records"]
        assert time.monotonic() - started >= 0.14


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ("rdap_failing", 502, "upstream_error"),
        ("rdap_down", 502, "upstream_error"),
        ("rdap_slow", 504, "upstream_timeout"),
        ("rdap_garbage", 502, "upstream_error"),
    ],
)
async def test_registry_faults(net: FakeInternet, base: Settings, fault: str, status: int, code: str) -> None:
    async with running_app(net.settings(base.replace(feeds_enabled=False))) as http:
        assert (await http.get("/whois/3.9.9.9")).status_code == 404  # the bootstrap is loaded and cached
        net.apply(fault)
        for ip in (ARIN_IP, RIPE_IP, "3.9.9.8"):  # the known networks and any other address
            response = await http.get(f"/whois/{ip}")
            assert (response.status_code, response.json()["error"]["code"]) == (status, code), ip
        net.restore()
        assert (await http.get(f"/whois/{ARIN_IP}")).status_code == 200  # errors are not cached


@pytest.mark.parametrize("fault", ["reputation_down", "reputation_slow", "reputation_garbage"])
async def test_reputation_faults(net: FakeInternet, base: Settings, fault: str) -> None:
    """The reputation source becomes unavailable; the DNSBL verdicts still count, and a slow
    source does not hold the answer past the check's deadline (1.5 s here, the source 4 s late)."""
    net.apply(fault)
    async with running_app(net.settings(base.replace(feeds_enabled=False))) as http:
        started = time.monotonic()
        listed = (await http.get(f"/blacklist/{LISTED_IP}")).json()
        assert time.monotonic() - started < 4.0  # before the slow source (4 s) could have answered
        started = time.monotonic()
        clear = (await http.get("/blacklist/8.8.8.8")).json()
        assert time.monotonic() - started < 4.0
        assert sources(listed)["stopforumspam.com"] == sources(clear)["stopforumspam.com"] == "unavailable"
        assert (listed["data"]["status"], clear["data"]["status"]) == ("listed", "unknown")


@pytest.mark.parametrize("fault", ["feeds_down", "feeds_garbage"])
async def test_feed_faults_lower_the_confidence(net: FakeInternet, base: Settings, fault: str) -> None:
    """Feeds that fail at start-up leave the VPN verdict to the other sources, with low confidence
    (docs/API.md#vpn-detection)."""
    net.apply(fault)
    async with running_app(net.settings(base)) as http:
        health = await wait_for_feeds(http, "missing")
        assert all("error" in h for h in health.values()), health
        vpn = (await http.get(f"/ip/{VPN_SERVER_ADDRESS}/vpn")).json()["data"]
        assert (vpn["isVpn"], vpn["confidence"]) == (False, "low")


async def test_slow_feeds_do_not_hold_start_up(net: FakeInternet, base: Settings) -> None:
    net.apply("feeds_slow")  # 5 s per feed download
    started = time.monotonic()
    async with running_app(net.settings(base)) as http:
        assert (await http.get("/readyz")).status_code == 200
        vpn = (await http.get(f"/ip/{VPN_SERVER_ADDRESS}/vpn")).json()["data"]
        assert vpn["confidence"] == "low"  # not loaded yet: the verdict does not wait for them
        assert time.monotonic() - started < 5.0  # before a single 5 s download could have finished


def test_settings_and_env_agree(net: FakeInternet) -> None:
    """The two ways of pointing the service here (a process's environment, an app's Settings) agree."""
    given = net.settings(Settings())
    parsed = Settings.from_env(net.env)
    fields = ("dns_servers", "dns_timeout", "dnsbl_zones", "rdap_bootstrap_url", "reputation_url",
              "upstream_timeout", "cymru_zone", "feed_urls", "blacklist_deadline")  # fmt: skip
    assert {f: getattr(given, f) for f in fields} == {f: getattr(parsed, f) for f in fields}
    assert parsed.dns_servers == net.dns.servers
    assert all(url.startswith("http://127.0.0.1:") for url in parsed.feed_urls.values() if url)
