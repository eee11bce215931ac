"""The VPN providers' own server lists as feeds (issue 21): their formats, read from real samples,
and a bad download never replacing the last good copy."""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
from pathlib import Path

import pytest

from ipintel.capabilities.vpn import FeedSource, Strength
from ipintel.infra import feed_formats as formats
from ipintel.infra.feed_catalogue import DEFAULT_FEEDS, VPN_PROVIDERS
from ipintel.infra.feeds import HOST, FeedManager
from ipintel.infra.upstream import HttpClient
from tests.support import feeds as f
from tests.support.feeds import FeedServer, Reply

ip = ipaddress.ip_address
SPECS = {spec.name: spec for spec in DEFAULT_FEEDS}
# The real data shared with the project (its README): the ground truth's VPN lists are the default
# source's files as published (Joe12387/open-source-vpn-ip-lists, 2026-07-03; sha256 in the manifest).
REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"

# gluetun's server data for one provider, in the shape of qdm12/gluetun-servers' pkg/servers/ivpn.json
# (its first four servers as published, timestamp 1785990786 = 2026-08-06); written here, not copied.
GLUETUN_IVPN = {
    "version": 3,
    "timestamp": 1785990786,
    "servers": [
        {"vpn": "openvpn", "country": "Argentina", "city": "Buenos Aires", "isp": "Datapacket",
         "hostname": "ar1.gw.ivpn.net", "tcp": True, "udp": True, "ips": ["149.22.83.97"]},
        {"vpn": "wireguard", "country": "Argentina", "city": "Buenos Aires", "isp": "Datapacket",
         "hostname": "ar1.wg.ivpn.net", "wgpubkey": "NXlWMTFlNJKQXfOnt+DJogxnDmfapEdgmHNat2JqwE0=",
         "ips": ["149.22.83.100"]},
        {"vpn": "openvpn", "country": "Australia", "city": "Sydney", "isp": "M247",
         "hostname": "au-nsw1.gw.ivpn.net", "tcp": True, "udp": True, "ips": ["46.102.153.242"]},
        {"vpn": "wireguard", "country": "Australia", "city": "Sydney", "isp": "M247",
         "hostname": "au-nsw1.wg.ivpn.net", "wgpubkey": "KmSrG48t5xw9CJCPlYLBG3JnmiY0CnUgyRM5TUEwZhM=",
         "ips": ["46.102.153.246"]},
    ],
}  # fmt: skip


def real_lists() -> list[tuple[str, Path, int]]:
    if not (REALDATA / "manifest.json").exists():
        return []
    truth = json.loads((REALDATA / "manifest.json").read_text())["truth"]
    return [
        (name.removeprefix("vpn-"), REALDATA / "truth" / f"{name}.txt", entry["addresses"])
        for name, entry in sorted(truth.items())
        if name.startswith("vpn-")
    ]


@pytest.mark.skipif(not real_lists(), reason=f"no real data at {REALDATA}")
@pytest.mark.parametrize("key,path,count", real_lists(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_default_source_list_reads_as_published(key: str, path: Path, count: int) -> None:
    body = path.read_bytes()
    parsed = formats.vpn_server_list([body])
    servers = [p for p in parsed.prefixes if "/" not in p]
    assert (servers, parsed.skipped) == (body.decode().split(), 0)  # every address, in order, none dropped
    assert len(servers) == count
    assert parsed.labels is None
    assert key in SPECS and SPECS[key].parser is formats.vpn_server_list  # a feed reads this list, subnets too
    assert len(servers) >= SPECS[key].min_prefixes  # the real list passes the feed's believability rule
    versions = {ip(p).version for p in servers}
    assert versions == ({4, 6} if key in ("airvpn", "mullvad") else {4})  # the lists that publish IPv6 do
    # After the servers, the subnets holding two or more of them, each holding them.
    subnets = [ipaddress.ip_network(p) for p in parsed.prefixes[len(servers) :]]
    assert subnets == [ipaddress.ip_network(p) for p in formats.server_subnets(servers)]
    # Each server counted in its own /24 or /64 once, not tested against every subnet (quadratic: 35 s for NordVPN).
    holding = collections.Counter(
        ipaddress.ip_network(f"{server}/{24 if ip(server).version == 4 else 64}", strict=False) for server in servers
    )
    for subnet in subnets:
        assert subnet.prefixlen == (24 if subnet.version == 4 else 64)
        assert holding[subnet] >= 2  # the servers it holds: those whose /24 (/64) it is


def test_servers_subnets_need_two_servers() -> None:
    hosts = ["203.0.113.5", "203.0.113.9", "198.51.100.1", "2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:9::1"]
    assert formats.server_subnets(hosts) == ["203.0.113.0/24", "2001:db8:1:2::/64"]


# tn3w/ProtonVPN-IPs' protonvpn_ips.txt and tn3w/TunnelBear-IPs' tunnelbear_ips.txt (Apache-2.0), as
# published on 2026-08-22: a comment header, then one address per line; the first addresses of each,
# written here in that shape, not copied.
TN3W_HEADER = """#
# {name}
# https://github.com/tn3w/{repo}/blob/master/{name}
#
# An automatically updated list of IP addresses associated with the
# {what}.
#
# This list could be used to block malicious traffic from {owner} servers.
#
"""
TN3W_PROTON = TN3W_HEADER.format(
    name="protonvpn_ips.txt", repo="ProtonVPN-IPs", owner="ProtonVPN's",
    what="widely used free and privacy-focused VPN provider, ProtonVPN",
) + "2.58.241.67\n2.58.241.68\n2.58.241.69\n2.58.241.70\n5.157.13.3\n5.157.13.4\n"  # fmt: skip
TN3W_TUNNELBEAR = TN3W_HEADER.format(
    name="tunnelbear_ips.txt", repo="TunnelBear-IPs", owner="TunnelBear's",
    what="popular mobile VPN provider, TunnelBear",
) + "172.232.40.247\n38.248.89.38\n172.233.93.45\n107.150.113.54\n165.227.151.204\n"  # fmt: skip


def test_tn3w_lists_read_past_their_comment_header() -> None:
    proton = formats.vpn_server_list([TN3W_PROTON.encode()])
    assert proton.prefixes[:6] == [
        "2.58.241.67",
        "2.58.241.68",
        "2.58.241.69",
        "2.58.241.70",
        "5.157.13.3",
        "5.157.13.4",
    ]
    assert proton.prefixes[6:] == ["2.58.241.0/24", "5.157.13.0/24"] and proton.skipped == 0
    bear = formats.vpn_server_list([TN3W_TUNNELBEAR.encode()])
    assert bear.prefixes == ["172.232.40.247", "38.248.89.38", "172.233.93.45", "107.150.113.54", "165.227.151.204"]
    # TunnelBear's servers are cloud instances: their /24s are other customers' too, never its network.
    assert SPECS["tunnelbear"].parser is formats.vpn_servers_only
    two_in_a_subnet = TN3W_TUNNELBEAR + "172.232.40.9\n"
    assert formats.vpn_servers_only([two_in_a_subnet.encode()]).prefixes[-1] == "172.232.40.9"
    assert "172.232.40.0/24" in formats.vpn_server_list([two_in_a_subnet.encode()]).prefixes
    # Both bodies of the protonvpn feed (its list and its exits) read as one.
    both = formats.vpn_server_list([TN3W_PROTON.encode(), b"2.58.241.67\n185.159.157.1\n"])
    assert [p for p in both.prefixes if "/" not in p] == [*proton.prefixes[:6], "185.159.157.1"]


def test_gluetun_server_data_reads_every_servers_addresses() -> None:
    parsed = formats.vpn_server_list([json.dumps(GLUETUN_IVPN).encode()])
    servers = ["149.22.83.97", "149.22.83.100", "46.102.153.242", "46.102.153.246"]
    assert parsed.prefixes == [*servers, "149.22.83.0/24", "46.102.153.0/24"]
    assert parsed.skipped == 0


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html><html><body>Rate limited</body></html>",
        b'{"servers": "none"}',
        b'{"servers": [{"hostname": "a", "ips": ["149.22.83',  # truncated JSON
        b"10.0.0.0/8\n172.16.0.0/12\n1.2.3.4\n",  # ranges are not servers: mostly junk
    ],
    ids=["html", "not-a-list", "truncated-json", "prefixes"],
)
def test_what_is_not_a_server_list_is_refused(body: bytes) -> None:
    with pytest.raises(formats.FeedFormatError):
        formats.vpn_server_list([body])


def test_every_provider_has_a_feed_that_names_it() -> None:
    for provider in VPN_PROVIDERS:
        spec = SPECS[provider.key]
        assert spec.parser in (formats.vpn_server_list, formats.vpn_servers_only)
        assert (spec.evidence, spec.provider, spec.reason) == ("vpn", provider.name, f"vpn-server:{provider.key}")
        assert spec.urls == provider.sources and spec.urls[0].startswith("https://raw.githubusercontent.com/")
    assert SPECS["protonvpn"].urls[1].endswith("/protonvpn_ips.txt")  # Proton's exits, beside its entries


# Downloads: a bad answer never replaces the last good copy -----------------------------------


def manager(http: HttpClient, server: FeedServer, directory: Path) -> FeedManager:
    return FeedManager(http, directory, overrides=server.feed_urls(), timeout=2.0)


def good_nordvpn() -> bytes:
    return f.provider_lists()["nordvpn"][0]


@pytest.mark.parametrize(
    "bad",
    [
        Reply(b"<html><head><title>404</title></head><body>Not Found</body></html>", content_type="text/html"),
        Reply(b"", status=200),  # an empty list
        Reply(b"# nothing today\n"),  # a list emptied of servers
        Reply(f.text_list(["37.19.200.10", "193.10.0.1", "193.10.0.2"])),  # far fewer than the feed's minimum
        Reply(good_nordvpn(), truncate=2000),  # the connection cut mid-body
        Reply(b"193.10.0.1\n" * (SPECS["nordvpn"].max_bytes // 11 + 1)),  # over the size cap
    ],
    ids=["html", "empty-body", "empty-list", "too-few", "truncated", "oversized"],
)
async def test_a_bad_provider_list_keeps_the_last_good_copy(
    http: HttpClient, feed_server: FeedServer, tmp_path: Path, bad: Reply
) -> None:
    feeds = manager(http, feed_server, tmp_path)
    assert await feeds.refresh("nordvpn")
    snapshot = (tmp_path / "nordvpn.txt").read_bytes()
    good = feeds.feeds["nordvpn"].ranges

    feed_server.set("/nordvpn/0", bad)
    assert not await feeds.refresh("nordvpn")
    health = feeds.health()["nordvpn"]
    assert health["status"] == "ok" and health["error"]
    assert health["prefixes"] >= SPECS["nordvpn"].min_prefixes + 1
    assert feeds.feeds["nordvpn"].ranges is good
    assert f.feed_tags(feeds, "nordvpn", ip(f.NORDVPN_SERVER_ADDRESS)) == {HOST}
    assert (tmp_path / "nordvpn.txt").read_bytes() == snapshot

    # A restart without network starts from that copy.
    restarted = FeedManager(http, tmp_path, overrides={"nordvpn": "http://127.0.0.1:9/unreachable"}, timeout=0.5)
    await restarted.load_snapshots()
    assert f.feed_provider(restarted, "nordvpn", ip(f.NORDVPN_SERVER_ADDRESS)) == "NordVPN"


async def test_the_combined_index_of_the_lists_answers_as_each_list_does(
    http: HttpClient, feed_server: FeedServer, tmp_path: Path
) -> None:
    """The providers' lists are matched through one index built in a thread; until it is there, each
    list is asked in turn. Both give the same signals, and a refreshed list is seen by the next build."""
    feeds = manager(http, feed_server, tmp_path)
    for spec in DEFAULT_FEEDS:
        assert await feeds.refresh(spec.name), spec.name
    source = FeedSource(feeds)
    addresses = [
        f.NORDVPN_SERVER_ADDRESS, f.NORDVPN_SUBNET_ADDRESS, f.SHARED_SUBNET_ADDRESS, *f.SHARED_SUBNET,
        f.MULLVAD_V6_SERVER_ADDRESS, f.AWS_ADDRESS, f.RELAY_ADDRESS, "81.2.69.160",
    ]  # fmt: skip
    one_by_one = [await source.signals(ip(a)) for a in addresses]  # the first call starts the build
    assert source._combined is None
    for _ in range(200):
        await asyncio.sleep(0.01)
        if source._combined is not None:
            break
    assert source._combined is not None
    assert [await source.signals(ip(a)) for a in addresses] == one_by_one
    assert [s.reason for s in one_by_one[0]] == ["vpn-range:x4bnet", "datacenter:x4bnet", "vpn-server:nordvpn"]
    assert [s.reason for s in one_by_one[1]] == ["vpn-subnet:nordvpn"]
    assert one_by_one[2] == []

    feed_server.set("/nordvpn/0", f.text_list([f.NORDVPN_SUBNET_ADDRESS, *f.fillers("193.10.0.0/16", 1600, 32)[1:]]))
    assert await feeds.refresh("nordvpn")
    await source.signals(ip(f.NORDVPN_SUBNET_ADDRESS))  # sees the change: builds again
    for _ in range(200):
        await asyncio.sleep(0.01)
        if source._combined is not None:
            break
    found = await source.signals(ip(f.NORDVPN_SUBNET_ADDRESS))
    assert [(s.reason, s.strength) for s in found] == [("vpn-server:nordvpn", Strength.EXACT)]
