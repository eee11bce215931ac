"""Feeds for tests: small files in each real published format, served from 127.0.0.1.

The writers produce the formats the service downloads (the Tor bulk exit
list, AWS ``ip-ranges.json``, Google ``cloud.json``, Azure service tags,
Oracle ``public_ip_ranges.json``, Cloudflare's text lists, DigitalOcean's
geofeed CSV, X4BNet's lists, Apple's iCloud Private Relay egress CSV, the VPN providers'
server lists). :func:`world` is a small, consistent set of
feeds with known addresses in them, padded with filler prefixes to each
feed's minimum size, so tests read like::

    async with FeedServer() as server:      # or the ``feed_server`` fixture
        server.serve_world()
        settings = settings.replace(feeds_enabled=True, feed_urls=server.feed_urls())
        async with running_app(settings) as http:
            await wait_for_feeds(http, "ok")

:class:`FeedServer` answers each path with what the test set (a body, a
status, a delay, a truncated body, a redirect) and counts requests.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ipintel.addresses import IPAddress
from ipintel.infra.feed_catalogue import DEFAULT_FEEDS, VPN_PROVIDERS
from ipintel.infra.feeds import HOST, NET, FeedManager, named_provider

# Format writers ------------------------------------------------------------------


def text_list(entries: Iterable[str], *, comment: str | None = None) -> bytes:
    """The Tor bulk exit list, Cloudflare ips-v4/ips-v6, X4BNet ipv4.txt: one per line."""
    head = f"# {comment}\n" if comment else ""
    return (head + "".join(f"{e}\n" for e in entries)).encode()


def aws_ip_ranges(v4: Iterable[str], v6: Iterable[str] = ()) -> bytes:
    return json.dumps(
        {
            "syncToken": "1700000000",
            "createDate": "2024-01-01-00-00-00",
            "prefixes": [
                {"ip_prefix": p, "region": "us-east-1", "service": "AMAZON", "network_border_group": "us-east-1"}
                for p in v4
            ],
            "ipv6_prefixes": [
                {"ipv6_prefix": p, "region": "us-east-1", "service": "AMAZON", "network_border_group": "us-east-1"}
                for p in v6
            ],
        }
    ).encode()


def google_cloud_json(v4: Iterable[str], v6: Iterable[str] = ()) -> bytes:
    prefixes: list[dict[str, str]] = [{"ipv4Prefix": p, "service": "Google Cloud", "scope": "us-central1"} for p in v4]
    prefixes += [{"ipv6Prefix": p, "service": "Google Cloud", "scope": "us-central1"} for p in v6]
    return json.dumps(
        {"syncToken": "1700000000000", "creationTime": "2024-01-01T00:00:00", "prefixes": prefixes}
    ).encode()


def azure_service_tags(prefixes: Iterable[str]) -> bytes:
    prefixes = list(prefixes)
    half = len(prefixes) // 2

    def tag(name: str, region: str, items: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "id": name,
            "properties": {
                "changeNumber": 7,
                "region": region,
                "regionId": 0,
                "platform": "Azure",
                "systemService": "",
                "addressPrefixes": items,
                "networkFeatures": ["API", "NSG"],
            },
        }

    # The superset tag and two regional tags repeating its prefixes, as the real file does.
    values = [
        tag("AzureCloud", "", prefixes),
        tag("AzureCloud.westeurope", "westeurope", prefixes[:half]),
        tag("AzureCloud.eastus", "eastus", prefixes[half:]),
    ]
    return json.dumps({"changeNumber": 300, "cloud": "Public", "values": values}).encode()


def oracle_ranges(cidrs: Iterable[str]) -> bytes:
    return json.dumps(
        {
            "last_updated_timestamp": "2024-01-01T00:00:00.000000",
            "regions": [{"region": "us-phoenix-1", "cidrs": [{"cidr": c, "tags": ["OCI"]} for c in cidrs]}],
        }
    ).encode()


def icloud_relay_csv(rows: Iterable[tuple[str, str, str, str]]) -> bytes:
    """Apple's egress-ip-ranges.csv: ``prefix,country,region,city,`` per row (the city may be
    empty, every row ends in an empty field), no header, IPv4 and IPv6 rows in one file."""
    return "".join(f"{prefix},{country},{region},{city},\n" for prefix, country, region, city in rows).encode()


# Shapes of the real file's rows: /27-/31 IPv4 blocks and /64 IPv6 blocks, one per city.
_RELAY_PLACES = [
    ("GB", "GB-EN", "London"), ("US", "US-CA", "Los Angeles"), ("DE", "DE-BE", "Berlin"),
    ("JP", "JP-13", ""), ("US", "US-WA", "SEATTLE"), ("FR", "FR-IDF", "Paris"), ("BR", "BR-SP", "São Paulo"),
]  # fmt: skip


@functools.cache
def _relay_world() -> bytes:
    """The relay feed of the test world: the known rows and enough filler rows (about
    22,000, above the feed's minimum of 20,000) in the real file's shapes. Built once."""
    rows = [
        ("172.224.226.0/27", "GB", "GB-EN", "London"),
        ("172.224.226.32/31", "GB", "GB-SC", "Aberdeen"),
        ("104.28.30.0/26", "JP", "JP-13", ""),
        ("2a02:26f7:b3c0:4000::/64", "US", "US-CA", "Los Angeles"),
        ("2a02:26f7:b3c0:4100::/64", "US", "US-CA", "Los Angeles"),  # on X4BNet's VPN list too
    ]
    for i in range(12_000):  # /31s in 172.225.0.0/16
        rows.append((f"172.225.{(2 * i) >> 8}.{(2 * i) & 255}/31", *_RELAY_PLACES[i % len(_RELAY_PLACES)]))
    for i in range(10_000):  # /64s in 2a09:bac1::/32
        rows.append((f"2a09:bac1:{i >> 4:x}:{(i & 15) << 12:x}::/64", *_RELAY_PLACES[i % len(_RELAY_PLACES)]))
    return icloud_relay_csv(rows)


def geofeed_csv(prefixes: Iterable[str]) -> bytes:
    """DigitalOcean's geo/google.csv (RFC 8805): prefix,country,region,city,postal."""
    return ("".join(f"{p},US,US-NY,New York,10001\n" for p in prefixes)).encode()


def azure_download_page(link: str) -> bytes:
    return (
        "<!DOCTYPE html><html><head><title>Azure IP Ranges and Service Tags - Public Cloud</title></head><body>"
        f'<a href="{link}" class="mscom-link">Download</a></body></html>'
    ).encode()


def fillers(network: str, count: int, new_prefix: int) -> list[str]:
    """``count`` distinct subnets of ``network`` (padding a feed to its minimum size)."""
    return list(_fillers(network, count, new_prefix))


@functools.cache  # the feed world is built for every test that serves it: ~2,500 subnets each time
def _fillers(network: str, count: int, new_prefix: int) -> tuple[str, ...]:
    net = ipaddress.ip_network(network)
    out: list[str] = []
    for sub in net.subnets(new_prefix=new_prefix):
        if len(out) == count:
            break
        out.append(str(sub) if new_prefix < net.max_prefixlen else str(sub.network_address))
    return tuple(out)


# The test world ----------------------------------------------------------------

TOR_EXIT = "185.220.101.1"
AWS_ADDRESS = "3.5.140.2"  # in 3.5.140.0/22
AWS_V6_ADDRESS = "2600:1f14::1"
GCP_ADDRESS = "34.80.0.9"
AZURE_ADDRESS = "20.33.0.5"
ORACLE_ADDRESS = "129.146.0.7"
CLOUDFLARE_ADDRESS = "104.16.1.1"
DIGITALOCEAN_ADDRESS = "104.131.0.4"
VPN_RANGE_ADDRESS = "37.19.200.77"  # in a listed /24: a VPN operator's network
VPN_SERVER_ADDRESS = "89.187.185.11"  # listed alone: a VPN provider's server
DATACENTER_ADDRESS = "5.1.2.3"
RELAY_ADDRESS = "172.224.226.9"  # in 172.224.226.0/27, an iCloud Private Relay egress block
RELAY_V6_ADDRESS = "2a02:26f7:b3c0:4000::1a"
RELAY_ON_VPN_LIST_ADDRESS = "104.28.30.5"  # a relay egress block that X4BNet's VPN list (in this world) holds too
RELAY_V6_ON_VPN_LIST_ADDRESS = "2a02:26f7:b3c0:4100::7"  # the same in IPv6
# VPN providers' own servers: NordVPN's inside X4BNet's /24 and M247's AS (a network-level listing
# and a hosting AS name it too), Mullvad's in IPv6.
NORDVPN_SERVER_ADDRESS = "37.19.200.10"
MULLVAD_V6_SERVER_ADDRESS = "2a03:1b20:1:f410::a01f"
NORDVPN_SUBNET_ADDRESS = "193.10.1.77"  # not listed, in a /24 of listed NordVPN servers (the fillers below)
SHARED_SUBNET = ("45.134.140.1", "45.134.140.2", "45.134.140.3", "45.134.140.4")  # PIA's two, Surfshark's two
SHARED_SUBNET_ADDRESS = "45.134.140.99"  # in a /24 both rent servers in: neither's network

CLOUDFLARE_V4 = [
    "173.245.48.0/20", "103.21.244.0/22", "103.22.200.0/22", "103.31.4.0/22", "141.101.64.0/18",
    "108.162.192.0/18", "190.93.240.0/20", "188.114.96.0/20", "197.234.240.0/22", "198.41.128.0/17",
    "162.158.0.0/15", "104.16.0.0/13", "104.24.0.0/14", "172.64.0.0/13", "131.0.72.0/22",
]  # fmt: skip
CLOUDFLARE_V6 = [
    "2400:cb00::/32", "2606:4700::/32", "2803:f800::/32", "2405:b500::/32", "2405:8100::/32",
    "2a06:98c0::/29", "2c0f:f248::/32",
]  # fmt: skip


def world() -> dict[str, list[bytes]]:
    """Feed name -> the bodies of its URLs, each feed at its minimum size or a bit above. A new dict and new lists
    each call (a test may change its copy); the bodies, immutable, are built once."""
    return {name: list(bodies) for name, bodies in _world().items()}


@functools.cache  # served to every test that starts the feed server or the fake internet: ~0.1 s to build
def _world() -> dict[str, tuple[bytes, ...]]:
    return {name: tuple(bodies) for name, bodies in _world_bodies().items()}


def _world_bodies() -> dict[str, list[bytes]]:
    return {
        "tor": [text_list([TOR_EXIT, *fillers("185.220.100.0/24", 150, 32)])],
        "aws": [aws_ip_ranges(["3.5.140.0/22", *fillers("52.0.0.0/10", 1100, 24)], ["2600:1f14::/35"])],
        "gcp": [google_cloud_json(["34.80.0.0/15", *fillers("35.184.0.0/13", 150, 24)], ["2600:1900::/35"])],
        "azure": [azure_service_tags(["20.33.0.0/16", *fillers("40.64.0.0/10", 1100, 24), "2603:1000::/40"])],
        "oracle": [oracle_ranges(["129.146.0.0/21", *fillers("132.145.0.0/16", 60, 24)])],
        "cloudflare": [text_list(CLOUDFLARE_V4), text_list(CLOUDFLARE_V6)],
        "digitalocean": [geofeed_csv(["104.131.0.0/18", *fillers("159.89.0.0/16", 120, 24)])],
        "vpn": [
            text_list(["37.19.200.0/24", VPN_SERVER_ADDRESS, "104.28.30.0/24", *fillers("45.83.0.0/16", 120, 24)]),
            text_list(["2a02:6ea0:1000::/37", "2a02:26f7:b3c0:4100::/56"]),
        ],
        "datacenter": [
            text_list(["5.1.0.0/16", "3.5.140.0/22", "37.19.200.0/24", *fillers("31.0.0.0/12", 1100, 24)]),
            text_list(["2a01:4f8::/29"]),
        ],
        "relay": [_relay_world()],
        **provider_lists(),
    }


def provider_lists() -> dict[str, list[bytes]]:
    """Every VPN provider's server list of the test world in the default source's shape (one address
    per line), each at its feed's minimum size: filler servers in a /16 of its own."""
    lists: dict[str, list[bytes]] = {}
    for i, provider in enumerate(VPN_PROVIDERS):
        known = {
            "nordvpn": [NORDVPN_SERVER_ADDRESS],
            "mullvad": [MULLVAD_V6_SERVER_ADDRESS],
            "pia": list(SHARED_SUBNET[:2]),
            "surfshark": list(SHARED_SUBNET[2:]),
        }.get(provider.key, [])
        servers = [
            s for s in fillers(f"193.{10 + i}.0.0/16", provider.min_servers + 1, 32) if s != NORDVPN_SUBNET_ADDRESS
        ]
        lists[provider.key] = [text_list([*known, *servers])]
    return lists


# The server --------------------------------------------------------------------


@dataclass
class Reply:
    """What a path answers. ``truncate`` > 0 sends only that many bytes of the
    body while announcing the whole length (a connection cut mid-body)."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    truncate: int = 0


class FeedServer:
    """An aiohttp server on 127.0.0.1 answering each path as told."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.hits: Counter[str] = Counter()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def set(self, path: str, reply: Reply | bytes) -> None:
        self.replies[path] = reply if isinstance(reply, Reply) else Reply(reply)

    def paths(self, name: str, count: int) -> list[str]:
        return [f"/{name}/{i}" for i in range(count)]

    def serve(self, name: str, bodies: list[bytes]) -> None:
        for path, body in zip(self.paths(name, len(bodies)), bodies, strict=True):
            self.set(path, body)

    def serve_world(self, feeds: dict[str, list[bytes]] | None = None) -> None:
        for name, bodies in (feeds or world()).items():
            self.serve(name, bodies)

    def feed_urls(self, feeds: dict[str, list[bytes]] | None = None) -> dict[str, str | None]:
        """``settings.feed_urls`` pointing every feed at this server (as many URLs as bodies)."""
        counts = {name: len(bodies) for name, bodies in (feeds or world()).items()}
        return {
            spec.name: " ".join(self.url(p) for p in self.paths(spec.name, counts.get(spec.name, 1)))
            for spec in DEFAULT_FEEDS
        }

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[path] += 1
        reply = self.replies.get(path)
        if reply is None:
            return web.Response(status=404, text="not found")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.truncate:
            response = web.StreamResponse(status=reply.status, headers={"Content-Type": reply.content_type})
            response.content_length = len(reply.body)
            await response.prepare(request)
            await response.write(reply.body[: reply.truncate])
            request.transport.close()  # type: ignore[union-attr]
            return response
        return web.Response(
            status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type, **reply.headers}
        )

    async def start(self) -> FeedServer:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FeedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


# The service's side ------------------------------------------------------------------


async def wait_for_feeds(http: Any, status: str | None = None, *, timeout: float = 20.0) -> dict[str, Any]:
    """Until every feed of the app behind ``http`` (a ``running_app`` client) was fetched once (loaded,
    or failed with an error) and, given ``status``, every feed is in it; bounded. The feed health."""
    intel = http.app.state.intel
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = intel.feed_health()
        done = all(h["status"] == "ok" or "error" in h for h in health.values())
        if done and (status is None or {h["status"] for h in health.values()} == {status}):
            return health
        assert time.monotonic() < deadline, health
        await asyncio.sleep(0.05)


def feed_tags(feeds: FeedManager, name: str, ip: IPAddress) -> frozenset[str]:
    """Tags (``host``/``net``) of the feed's entries holding ``ip``; empty when none or not loaded.
    (The service matches through ``vpn.FeedSource``, which reads every feed's index directly.)"""
    ranges = feeds.feeds[name].ranges
    return frozenset(ranges.lookup(ip) & {HOST, NET}) if ranges is not None else frozenset()


def feed_provider(feeds: FeedManager, name: str, ip: IPAddress) -> str | None:
    """The operator (and region) the feed names for ``ip``, as a verdict's ``provider`` would
    have it from this feed; ``None`` when the feed does not hold ``ip`` or names nobody."""
    state = feeds.feeds[name]
    tags = state.ranges.lookup(ip) if state.ranges is not None else frozenset()
    return (named_provider(tags) or state.spec.provider) if tags else None
