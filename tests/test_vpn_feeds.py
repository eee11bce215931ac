"""Feeds: each published format, downloads from a local server, validation, snapshots, health."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ipintel.infra import feed_formats as formats
from ipintel.infra.feed_catalogue import DEFAULT_FEEDS
from ipintel.infra.feeds import HOST, NET, FeedManager, configured_urls
from ipintel.infra.upstream import HttpClient
from ipintel.settings import Settings
from tests.support import feeds as f
from tests.support.feeds import FeedServer, Reply
from tests.support.http_mock import mock_http

ip = ipaddress.ip_address
SPECS = {spec.name: spec for spec in DEFAULT_FEEDS}


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server(feed_server: FeedServer) -> FeedServer:
    """The feed world's server (conftest), by the short name these tests give it."""
    return feed_server


def temporary_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def manager(http: HttpClient, server: FeedServer, directory: Path, **kwargs: object) -> FeedManager:
    return FeedManager(http, directory, overrides=server.feed_urls(), timeout=2.0, **kwargs)  # type: ignore[arg-type]


# Formats ---------------------------------------------------------------------------


def test_each_format_parses_its_real_shape() -> None:
    world = f.world()
    expected_first = {
        "tor": f.TOR_EXIT,
        "aws": "3.5.140.0/22",
        "gcp": "34.80.0.0/15",
        "azure": "20.33.0.0/16",
        "oracle": "129.146.0.0/21",
        "cloudflare": "173.245.48.0/20",
        "digitalocean": "104.131.0.0/18",
        "vpn": "37.19.200.0/24",
        "datacenter": "5.1.0.0/16",
        "relay": "172.224.226.0/27",
        "nordvpn": f.NORDVPN_SERVER_ADDRESS,
        "mullvad": f.MULLVAD_V6_SERVER_ADDRESS,
    }
    for name, bodies in world.items():
        if name not in expected_first:  # the other providers' lists: fillers only (tests/test_vpn_providers.py)
            continue
        parsed = SPECS[name].parser(bodies)
        assert parsed.prefixes[0] == expected_first[name], name
        assert parsed.skipped == 0, name
        assert len(parsed.prefixes) >= SPECS[name].min_prefixes, name
    # IPv6 entries come along in every format that has them.
    assert "2600:1f14::/35" in formats.aws_ip_ranges(world["aws"]).prefixes
    assert "2600:1900::/35" in formats.google_cloud(world["gcp"]).prefixes
    assert "2606:4700::/32" in formats.text_list(world["cloudflare"]).prefixes
    assert "2a02:6ea0:1000::/37" in formats.text_list(world["vpn"]).prefixes
    assert "2a02:26f7:b3c0:4000::/64" in formats.icloud_relay_csv(world["relay"]).prefixes


def test_cloud_formats_keep_each_prefix_region() -> None:
    aws = formats.aws_ip_ranges(
        [
            json.dumps(
                {
                    "prefixes": [
                        # The umbrella AMAZON entry and the service's entry of one prefix count once.
                        {"ip_prefix": "3.5.140.0/22", "region": "ap-northeast-2", "service": "AMAZON"},
                        {"ip_prefix": "3.5.140.0/22", "region": "ap-northeast-2", "service": "S3"},
                        {"ip_prefix": "13.32.0.0/15", "region": "GLOBAL", "service": "AMAZON"},
                        {"ip_prefix": "13.32.0.0/15", "region": "GLOBAL", "service": "CLOUDFRONT"},
                        {"ip_prefix": "15.230.0.0/24", "region": "<script>", "service": "AMAZON"},
                    ],
                    "ipv6_prefixes": [{"ipv6_prefix": "2600:1f14::/35", "region": "us-west-2", "service": "EC2"}],
                }
            ).encode()
        ]
    )
    assert dict(zip(aws.prefixes, aws.labels or [], strict=True)) == {
        "3.5.140.0/22": "ap-northeast-2",
        "13.32.0.0/15": "CLOUDFRONT",  # GLOBAL: the service names it
        "15.230.0.0/24": "",  # a label not of a region's shape is dropped, the prefix kept
        "2600:1f14::/35": "us-west-2",
    }
    gcp = formats.google_cloud([f.google_cloud_json(["34.80.0.0/15"], ["2600:1900::/35"])])
    assert gcp.labels == ["us-central1", "us-central1"]
    azure = formats.azure_service_tags([f.azure_service_tags(["20.33.0.0/16", "40.64.0.0/24", "2603:1000::/40"])])
    # AzureCloud (no region) lists every prefix first; the regional tags name them.
    assert dict(zip(azure.prefixes, azure.labels or [], strict=True)) == {
        "20.33.0.0/16": "westeurope",
        "40.64.0.0/24": "eastus",
        "2603:1000::/40": "eastus",
    }
    oracle = formats.oracle_cloud([f.oracle_ranges(["129.146.0.0/21"])])
    assert oracle.labels == ["us-phoenix-1"]
    assert formats.text_list([f.text_list(["1.2.3.0/24"])]).labels is None  # lists name no region


def test_distinct_labels_are_bounded() -> None:
    entries = [
        {"ip_prefix": f"52.{i >> 8}.{i & 255}.0/24", "region": f"region-{i}", "service": "EC2"}
        for i in range(formats.MAX_LABELS + 500)
    ]
    parsed = formats.aws_ip_ranges([json.dumps({"prefixes": entries}).encode()])
    assert len(parsed.prefixes) == formats.MAX_LABELS + 500  # every prefix is kept ...
    assert len(set(parsed.labels or []) - {""}) == formats.MAX_LABELS  # ... but no more names than the bound


def test_azure_prefixes_repeated_under_several_tags_count_once() -> None:
    parsed = formats.azure_service_tags([f.azure_service_tags(["20.33.0.0/16", "40.64.0.0/24", "2603:1000::/40"])])
    assert sorted(parsed.prefixes) == ["20.33.0.0/16", "2603:1000::/40", "40.64.0.0/24"]


def test_text_list_comments_blank_lines_and_a_few_bad_lines() -> None:
    body = (
        b"# Tor exit list\n\n185.220.101.1\n185.220.101.2  # trailing comment\n"
        + b"".join(f"185.220.100.{i}\n".encode() for i in range(20))
        + b"not-an-address\n"
    )
    parsed = formats.text_list([body])
    assert parsed.prefixes[:2] == ["185.220.101.1", "185.220.101.2"]
    assert parsed.skipped == 1


def test_icloud_relay_csv_reads_ipv4_and_ipv6_rows() -> None:
    # The published shape: no header, prefix,country,region,city, with a trailing empty field;
    # the city may be empty, and a quoted city may hold a comma.
    body = (
        b"172.224.226.0/27,GB,GB-EN,London,\n"
        b"172.224.226.32/31,GB,GB-SC,Aberdeen,\n"
        b"104.28.30.0/26,JP,JP-13,,\n"
        b'146.75.136.0/22,US,US-DC,"Washington, D.C.",\n'
        b"2a02:26f7:b3c0:4000::/64,US,US-CA,Los Angeles,\n"
        b"2a09:bac2:b089:100::/56,US,US-OR,Oregon City,"  # the last row without a newline is whole
    )
    parsed = formats.icloud_relay_csv([body])
    assert parsed.prefixes == [
        "172.224.226.0/27",
        "172.224.226.32/31",
        "104.28.30.0/26",
        "146.75.136.0/22",
        "2a02:26f7:b3c0:4000::/64",
        "2a09:bac2:b089:100::/56",
    ]
    assert parsed.skipped == 0 and parsed.labels is None  # the location is not kept


@pytest.mark.parametrize(
    "cut",
    [
        b"2a02:26f7:b3c0:4000::/64,US,US-CA,Los Ang",  # mid-city
        b"2a02:26f7:b3c0:40",  # mid-prefix: still one field, and not a prefix
        b"172.224.227.0/27,GB,",
    ],
)
def test_icloud_relay_csv_refuses_a_body_cut_short(cut: bytes) -> None:
    whole = b"".join(f"172.224.{i}.0/27,GB,GB-EN,London,\n".encode() for i in range(100))
    with pytest.raises(formats.FeedFormatError, match="cut short"):
        formats.icloud_relay_csv([whole + cut])


def test_geofeed_reads_the_first_column_and_skips_comments() -> None:
    body = b"# DigitalOcean geofeed\n104.131.0.0/18,US,US-NY,New York,10001\n2604:a880::/32,US,US-NY,New York,\n\n"
    assert formats.geofeed_csv([body]).prefixes == ["104.131.0.0/18", "2604:a880::/32"]


@pytest.mark.parametrize(
    ("parser", "body"),
    [
        (formats.aws_ip_ranges, b'{"syncToken": "1", "prefixes": [{"ip_prefix": "3.5.140.0/22"'),  # truncated
        (formats.aws_ip_ranges, b'{"syncToken": "1"}'),  # not the document
        (formats.google_cloud, b"[]"),
        (formats.azure_service_tags, b"<!DOCTYPE html><html>Service unavailable</html>"),
        (formats.oracle_cloud, b'{"regions": 5}'),
        (formats.text_list, b"<html><body>captive portal</body></html>"),
        (formats.text_list, b"\xff\xfe\x00garbage"),
        (formats.text_list, b"".join(f"junk line {i}\n".encode() for i in range(50)) + b"1.2.3.4\n"),
        (formats.geofeed_csv, b"<html></html>"),
        (formats.icloud_relay_csv, b"<!DOCTYPE html><html><body>Service Unavailable</body></html>"),
        (formats.icloud_relay_csv, b"\n<html><head><title>502 Bad Gateway</title></head></html>"),
        (formats.icloud_relay_csv, b"".join(f"row {i},GB,GB-EN,London,\n".encode() for i in range(50))),
    ],
)
def test_bodies_that_are_not_the_format_are_refused(parser: formats.Parser, body: bytes) -> None:
    with pytest.raises(formats.FeedFormatError):
        parser([body])


def test_absurdly_wide_prefixes_are_junk() -> None:
    parsed = formats.text_list([b"0.0.0.0/0\n::/0\n" + b"".join(f"45.83.{i}.0/24\n".encode() for i in range(40))])
    assert "0.0.0.0/0" not in parsed.prefixes and "::/0" not in parsed.prefixes
    assert parsed.skipped == 2


def test_azure_download_link_is_found_on_the_page() -> None:
    page = f.azure_download_page(
        "https://download.microsoft.com/download/7/1/d/71d86715-5596-4529-9b13-da13a5de5b63/ServiceTags_Public_20240101.json"
    )
    link = formats.azure_download_link(page)
    assert link is not None and link.endswith("ServiceTags_Public_20240101.json")
    assert formats.azure_download_link(b"<html>nothing here</html>") is None


def test_configured_urls() -> None:
    spec = SPECS["cloudflare"]
    assert configured_urls(spec, {}) == spec.urls
    assert configured_urls(spec, {"cloudflare": None}) is None
    assert configured_urls(spec, {"cloudflare": "http://a/v4 | http://a/v6"}) == ("http://a/v4", "http://a/v6")
    assert configured_urls(spec, {"cloudflare": "http://a/v4 http://a/v6"}) == ("http://a/v4", "http://a/v6")
    # As IPINTEL_FEED_URLS gives them: comma-separated feeds, "|" between one feed's URLs, "name=" disables.
    overrides = Settings.from_env({"IPINTEL_FEED_URLS": "vpn=http://m/v4.txt|http://m/v6.txt, oracle="}).feed_urls
    assert configured_urls(SPECS["vpn"], overrides) == ("http://m/v4.txt", "http://m/v6.txt")
    assert configured_urls(SPECS["oracle"], overrides) is None
    assert configured_urls(SPECS["tor"], overrides) == SPECS["tor"].urls


# Downloads, validation, snapshots ------------------------------------------------------


async def test_refresh_downloads_every_feed_and_stores_snapshots(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    feeds = manager(http, server, tmp_path)
    assert {h["status"] for h in feeds.health().values()} == {"missing"}
    for name in feeds.feeds:
        assert await feeds.refresh(name), feeds.health()[name]
    health = feeds.health()
    assert {h["status"] for h in health.values()} == {"ok"}
    assert health["tor"]["prefixes"] == 151 and health["tor"]["ageSeconds"] is not None
    assert f.feed_tags(feeds, "tor", ip(f.TOR_EXIT)) == {HOST}
    assert f.feed_tags(feeds, "aws", ip(f.AWS_ADDRESS)) == {NET}
    assert f.feed_tags(feeds, "aws", ip(f.AWS_V6_ADDRESS)) == {NET}
    assert f.feed_tags(feeds, "vpn", ip(f.VPN_SERVER_ADDRESS)) == {HOST}
    assert f.feed_tags(feeds, "aws", ip("81.2.69.160")) == frozenset()
    assert f.feed_tags(feeds, "relay", ip(f.RELAY_ADDRESS)) == {NET}
    assert f.feed_tags(feeds, "relay", ip(f.RELAY_V6_ADDRESS)) == {NET}
    # Who each feed names: the cloud feeds with the region of the entry, the relay its service.
    assert f.feed_provider(feeds, "aws", ip(f.AWS_ADDRESS)) == "AWS us-east-1"
    assert f.feed_provider(feeds, "gcp", ip(f.GCP_ADDRESS)) == "Google Cloud us-central1"
    assert f.feed_provider(feeds, "azure", ip(f.AZURE_ADDRESS)) == "Azure westeurope"
    assert f.feed_provider(feeds, "oracle", ip(f.ORACLE_ADDRESS)) == "Oracle Cloud us-phoenix-1"
    assert f.feed_provider(feeds, "cloudflare", ip(f.CLOUDFLARE_ADDRESS)) == "Cloudflare"
    assert f.feed_provider(feeds, "relay", ip(f.RELAY_ADDRESS)) == "iCloud Private Relay"
    assert f.feed_provider(feeds, "vpn", ip(f.VPN_SERVER_ADDRESS)) is None  # X4BNet's lists name nobody
    assert health["relay"]["prefixes"] > SPECS["relay"].min_prefixes
    for name in feeds.feeds:
        assert (tmp_path / f"{name}.txt").is_file()
    assert server.hits["/cloudflare/0"] == 1 and server.hits["/cloudflare/1"] == 1  # v4 and v6 files


async def test_restart_without_network_starts_from_the_last_good_copy(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    clock = Clock()
    first = manager(http, server, tmp_path, clock=clock)
    for name in first.feeds:
        assert await first.refresh(name)
    await server.stop()  # the network is gone

    clock.now += 600
    second = manager(http, server, tmp_path, clock=clock)
    second.start(refresh=True)
    await asyncio.wait_for(second.snapshots_loaded.wait(), 10)
    try:
        assert f.feed_tags(second, "tor", ip(f.TOR_EXIT)) == {HOST}
        assert f.feed_tags(second, "gcp", ip(f.GCP_ADDRESS)) == {NET}
        assert f.feed_tags(second, "relay", ip(f.RELAY_V6_ADDRESS)) == {NET}
        assert f.feed_provider(second, "aws", ip(f.AWS_ADDRESS)) == "AWS us-east-1"  # regions kept on disk
        assert f.feed_provider(second, "relay", ip(f.RELAY_ADDRESS)) == "iCloud Private Relay"
        health = second.health()
        assert {h["status"] for h in health.values()} == {"ok"}
        assert health["tor"]["ageSeconds"] == 600.0  # the age of the data, not of the process
        assert health["azure"]["prefixes"] == first.health()["azure"]["prefixes"]
        assert health["relay"]["prefixes"] == first.health()["relay"]["prefixes"]
    finally:
        await second.close()


@pytest.mark.parametrize(
    "bad",
    [
        Reply(
            b'{"syncToken": "2", "prefixes": [{"ip_prefix": "3.5.140.0/22"}, {"ip_pre', content_type="application/json"
        ),
        Reply(f.aws_ip_ranges(["3.5.140.0/22"]), content_type="application/json"),  # parses to almost nothing
        Reply(b"<html><body>Service Unavailable</body></html>", content_type="text/html"),
        Reply(b"", status=503),
        Reply(f.aws_ip_ranges(["3.5.140.0/22", *f.fillers("52.0.0.0/10", 1100, 24)]), truncate=4000),
    ],
    ids=["truncated-json", "too-few", "html", "http-503", "connection-cut"],
)
async def test_a_bad_download_never_replaces_a_good_copy(
    http: HttpClient, server: FeedServer, tmp_path: Path, bad: Reply
) -> None:
    feeds = manager(http, server, tmp_path)
    assert await feeds.refresh("aws")
    snapshot = (tmp_path / "aws.txt").read_bytes()

    server.set("/aws/0", bad)
    assert not await feeds.refresh("aws")
    assert f.feed_tags(feeds, "aws", ip(f.AWS_ADDRESS)) == {NET}
    health = feeds.health()["aws"]
    assert health["status"] == "ok" and health["prefixes"] > 1000
    assert health["error"]
    assert (tmp_path / "aws.txt").read_bytes() == snapshot
    assert not temporary_files(tmp_path)  # none left behind

    server.serve("aws", f.world()["aws"])  # the source recovers
    assert await feeds.refresh("aws")
    assert "error" not in feeds.health()["aws"]


async def test_a_corrupt_snapshot_is_ignored(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    (tmp_path / "tor.txt").write_text('# ipintel feed snapshot v1\n# {"fetchedAt": 1}\n1.2.3.4\n')  # too few
    (tmp_path / "aws.txt").write_text("not a snapshot\n")
    feeds = manager(http, server, tmp_path)
    await feeds.load_snapshots()
    assert feeds.health()["tor"]["status"] == "missing"
    assert feeds.health()["aws"]["status"] == "missing"


async def test_a_body_over_the_feed_cap_is_refused(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    spec = SPECS["cloudflare"]
    server.set("/cloudflare/0", Reply(b"1.1.1.0/24\n" * (spec.max_bytes // 11 + 1)))
    feeds = manager(http, server, tmp_path)
    assert not await feeds.refresh("cloudflare")
    assert "over" in feeds.health()["cloudflare"]["error"]


async def test_a_slow_feed_times_out(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    server.set("/tor/0", Reply(f.world()["tor"][0], delay=1.0))
    feeds = FeedManager(http, tmp_path, overrides=server.feed_urls(), timeout=0.2)
    assert not await asyncio.wait_for(feeds.refresh("tor"), 2)
    assert "0.2 s" in feeds.health()["tor"]["error"]


async def test_redirects_are_followed(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    server.set("/moved", Reply(status=301, headers={"Location": "/tor/0"}))
    feeds = FeedManager(http, tmp_path, overrides={"tor": server.url("/moved")}, timeout=2.0)
    assert await feeds.refresh("tor")
    assert f.feed_tags(feeds, "tor", ip(f.TOR_EXIT)) == {HOST}


async def test_a_redirect_from_https_down_to_http_is_refused(http: HttpClient, tmp_path: Path) -> None:
    # The far side is mocked: a local HTTPS server is not needed to see the redirect refused.
    with mock_http() as mock:
        mock.get("https://feeds.example/tor", status=302, headers={"Location": "http://feeds.example/tor"})
        mock.get("http://feeds.example/tor", body=f.world()["tor"][0])
        feeds = FeedManager(http, tmp_path, overrides={"tor": "https://feeds.example/tor"}, timeout=2.0)
        assert not await feeds.refresh("tor")
    assert "refusing a redirect from HTTPS" in feeds.health()["tor"]["error"]
    assert feeds.health()["tor"]["status"] == "missing"


async def test_azure_page_leads_to_the_weekly_file(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    # The real page links download.microsoft.com; the parser only follows such links, so the
    # test serves a page whose link is that shape and rewrites nothing: it checks the page is
    # read and the link followed by pointing the weekly file's URL at the local server.
    weekly = "/download/7/1/d/abc/ServiceTags_Public_20240101.json"
    server.set(weekly, Reply(f.world()["azure"][0], content_type="application/json"))
    server.set(
        "/azure-page", Reply(f.azure_download_page("https://download.microsoft.com" + weekly), content_type="text/html")
    )

    def local_link(page: bytes) -> str | None:
        link = formats.azure_download_link(page)
        return link.replace("https://download.microsoft.com", server.base) if link else None

    spec = SPECS["azure"]
    feeds = FeedManager(
        http,
        tmp_path,
        overrides={"azure": server.url("/azure-page")},
        specs=[replace(spec, locate=local_link)],
        timeout=2.0,
    )
    assert await feeds.refresh("azure")
    assert f.feed_tags(feeds, "azure", ip(f.AZURE_ADDRESS)) == {NET}
    assert server.hits[weekly] == 1

    # A direct JSON URL (a mirror) is read as it is, byte-order mark included, as Microsoft writes it.
    server.set("/mirror.json", Reply(b"\xef\xbb\xbf" + f.world()["azure"][0], content_type="application/json"))
    mirror = FeedManager(http, tmp_path / "mirror", overrides={"azure": server.url("/mirror.json")}, timeout=2.0)
    assert await mirror.refresh("azure"), mirror.health()["azure"]
    assert f.feed_tags(mirror, "azure", ip(f.AZURE_ADDRESS)) == {NET}

    server.set("/azure-page", Reply(b"<html>no link today</html>", content_type="text/html"))
    assert not await feeds.refresh("azure")
    assert "no data link" in feeds.health()["azure"]["error"]


# Health and scheduling --------------------------------------------------------------------


async def test_health_turns_stale_then_disabled_feeds_say_so(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    clock = Clock()
    feeds = FeedManager(http, tmp_path, overrides={**server.feed_urls(), "oracle": None}, timeout=2.0, clock=clock)
    assert await feeds.refresh("tor")
    assert feeds.health()["tor"]["status"] == "ok"
    assert feeds.health()["oracle"] == {"status": "disabled", "ageSeconds": None, "prefixes": 0}
    assert not await feeds.refresh("oracle")

    clock.now += SPECS["tor"].stale_after + 1
    assert feeds.health()["tor"]["status"] == "stale"
    assert f.feed_tags(feeds, "tor", ip(f.TOR_EXIT)) == {HOST}  # stale data is still used
    assert not feeds.complete()


async def test_refresh_schedule(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    clock = Clock()
    feeds = manager(http, server, tmp_path, clock=clock)
    state = feeds.feeds["tor"]
    assert feeds.next_refresh_in(state) == 0  # nothing loaded: now
    assert await feeds.refresh("tor")
    assert feeds.next_refresh_in(state) == SPECS["tor"].interval
    clock.now += 1000
    assert feeds.next_refresh_in(state) == SPECS["tor"].interval - 1000
    server.set("/tor/0", Reply(b"", status=500))
    for expected in (60, 120, 240, 480, 960, 1920, 3600, 3600):  # backs off, never past the interval
        assert not await feeds.refresh("tor")
        assert feeds.next_refresh_in(state) == expected


async def test_background_refresh_starts_at_once_and_stops_on_close(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    feeds = manager(http, server, tmp_path)
    feeds.start(refresh=True)
    try:
        async with asyncio.timeout(20):
            while not feeds.complete():  # noqa: ASYNC110 - watching the manager from outside
                await asyncio.sleep(0.02)
    finally:
        await feeds.close()
    assert all(server.hits[p] == 1 for p in server.replies)  # one download each: the next is hours away


async def test_refresh_off_loads_snapshots_and_downloads_nothing(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    first = manager(http, server, tmp_path)
    assert await first.refresh("vpn")
    server.hits.clear()
    feeds = manager(http, server, tmp_path)
    feeds.start(refresh=False)
    await asyncio.wait_for(feeds.snapshots_loaded.wait(), 10)
    await asyncio.sleep(0.1)
    await feeds.close()
    assert f.feed_tags(feeds, "vpn", ip(f.VPN_RANGE_ADDRESS)) == {NET}
    assert feeds.health()["tor"]["status"] == "missing"
    assert sum(server.hits.values()) == 0


async def test_snapshot_format(http: HttpClient, server: FeedServer, tmp_path: Path) -> None:
    feeds = manager(http, server, tmp_path)
    assert await feeds.refresh("cloudflare")
    lines = (tmp_path / "cloudflare.txt").read_text().splitlines()
    assert lines[0] == "# ipintel feed snapshot v2"
    meta = json.loads(lines[1].removeprefix("#"))
    assert meta["feed"] == "cloudflare" and meta["prefixes"] == 22 and len(meta["sources"]) == 2
    assert lines[2:] == f.CLOUDFLARE_V4 + f.CLOUDFLARE_V6


async def test_snapshot_lines_carry_regions_and_old_snapshots_still_load(
    http: HttpClient, server: FeedServer, tmp_path: Path
) -> None:
    feeds = manager(http, server, tmp_path)
    assert await feeds.refresh("oracle")
    lines = (tmp_path / "oracle.txt").read_text().splitlines()
    assert lines[2] == "129.146.0.0/21 us-phoenix-1"
    assert json.loads(lines[1].removeprefix("#"))["prefixes"] == len(lines) - 2
    assert feeds.health()["oracle"]["prefixes"] == len(lines) - 2  # a named entry counts once

    # A snapshot of the first format (prefixes only) is read as it is, naming the operator alone.
    old = ["# ipintel feed snapshot v1", '# {"fetchedAt": 1700000000}', *(p.split()[0] for p in lines[2:])]
    (tmp_path / "v1" / "oracle.txt").parent.mkdir()
    (tmp_path / "v1" / "oracle.txt").write_text("\n".join(old) + "\n")
    reloaded = manager(http, server, tmp_path / "v1")
    await reloaded.load_snapshots()
    assert f.feed_tags(reloaded, "oracle", ip(f.ORACLE_ADDRESS)) == {NET}
    assert f.feed_provider(reloaded, "oracle", ip(f.ORACLE_ADDRESS)) == "Oracle Cloud"

    # A region on disk is held to the parsers' shape: an odd one names the operator alone.
    odd = ["# ipintel feed snapshot v2", '# {"fetchedAt": 1700000000}', "129.146.0.0/21 <b>x</b>", *old[3:]]
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "oracle.txt").write_text("\n".join(odd) + "\n")
    odd_copy = manager(http, server, tmp_path / "odd")
    await odd_copy.load_snapshots()
    assert f.feed_provider(odd_copy, "oracle", ip(f.ORACLE_ADDRESS)) == "Oracle Cloud"


@pytest.mark.parametrize(
    "bad",
    [
        Reply(b"<!DOCTYPE html><html><body>Service Unavailable</body></html>", content_type="text/html"),
        Reply(f.world()["relay"][0][:1_000_000] + b"2a09:bac1:ff:1000::/64,US,US-W", content_type="text/csv"),
        Reply(f.world()["relay"][0][: f.world()["relay"][0].index(b"\n", 40_000) + 1]),  # whole rows, too few
        Reply(f.world()["relay"][0], truncate=500_000),  # the connection cut mid-body
    ],
    ids=["html", "cut-mid-row", "too-few", "connection-cut"],
)
async def test_a_bad_relay_download_keeps_the_good_copy(
    http: HttpClient, server: FeedServer, tmp_path: Path, bad: Reply
) -> None:
    feeds = manager(http, server, tmp_path)
    assert await feeds.refresh("relay")
    good = feeds.health()["relay"]["prefixes"]
    snapshot = (tmp_path / "relay.txt").read_bytes()

    server.set("/relay/0", bad)
    assert not await feeds.refresh("relay")
    health = feeds.health()["relay"]
    assert (health["status"], health["prefixes"]) == ("ok", good) and health["error"]
    assert f.feed_tags(feeds, "relay", ip(f.RELAY_ADDRESS)) == {NET}
    assert (tmp_path / "relay.txt").read_bytes() == snapshot
