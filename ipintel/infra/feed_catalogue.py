"""The address feeds the service knows: one :class:`FeedSpec` per feed, the only list of their names
(:data:`FEED_NAMES`, which ``IPINTEL_FEED_URLS`` accepts). :class:`~ipintel.infra.feeds.FeedManager` acts on an
entry's source, schedule and limits; :class:`~ipintel.capabilities.vpn.feed_ranges.FeedSource` on its evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ipintel.infra import feed_formats as formats

HOUR = 3600.0
DAY = 24 * HOUR
MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class FeedSpec:
    """What a feed is: where it comes from, how to read it, how often, what a
    believable copy looks like, and what being on it means."""

    name: str
    urls: tuple[str, ...]  # default sources; several when v4 and v6 are published apart
    parser: formats.Parser
    # What an address on the feed is evidence of, in VPN detection's words: a
    # ``vpn.Kind`` value ("tor", "vpn", "hosting", "relay"), and the reason a verdict reports.
    evidence: str
    reason: str
    # The reason when the match is a prefix rather than a listed address, where the feed tells them
    # apart (a VPN provider's servers, then the subnets they stand in); ``None``: ``reason`` for both.
    network_reason: str | None = None
    # A single address on the feed is exact evidence about that address. Not for third-party
    # aggregates built from ASNs and ranges (X4BNet's): their single addresses are their inference,
    # evidence about the network like the rest of the list.
    exact: bool = True
    # The operator every entry of the feed belongs to, as a verdict's ``provider`` names it
    # ("AWS"; followed by the entry's region when the format gives one: "AWS us-east-1");
    # ``None`` for lists of many operators (Tor exits, X4BNet's lists).
    provider: str | None = None
    min_prefixes: int  # fewer than this after parsing: refused, the last good copy stays
    max_bytes: int  # per downloaded body
    interval: float = DAY  # seconds between refreshes
    stale_after: float = 3 * DAY  # a copy older than this is "stale": verdicts built on it are less sure
    # When a URL answers with a page rather than the data (Azure's download page),
    # find the data's link in it.
    locate: Callable[[bytes], str | None] | None = None
    description: str = ""


_X4B = "https://raw.githubusercontent.com/X4BNet/lists_vpn/main/output"

DEFAULT_FEEDS: tuple[FeedSpec, ...] = (
    FeedSpec(
        name="tor",
        urls=("https://check.torproject.org/torbulkexitlist",),
        parser=formats.text_list,
        evidence="tor",
        reason="tor-exit",
        interval=HOUR,
        stale_after=3 * HOUR,
        min_prefixes=100,  # about 1,000-1,500 exits are listed at any time
        max_bytes=4 * MIB,
        description="Tor Project bulk exit list",
    ),
    FeedSpec(
        name="aws",
        urls=("https://ip-ranges.amazonaws.com/ip-ranges.json",),
        parser=formats.aws_ip_ranges,
        evidence="hosting",
        reason="cloud:aws",
        provider="AWS",
        min_prefixes=1000,  # about 10,000
        max_bytes=16 * MIB,
        description="AWS ip-ranges.json",
    ),
    FeedSpec(
        name="gcp",
        urls=("https://www.gstatic.com/ipranges/cloud.json",),
        parser=formats.google_cloud,
        evidence="hosting",
        reason="cloud:gcp",
        provider="Google Cloud",
        min_prefixes=100,  # about 900
        max_bytes=8 * MIB,
        description="Google Cloud cloud.json",
    ),
    FeedSpec(
        name="azure",
        # The weekly file has a new name each week (ServiceTags_Public_YYYYMMDD.json);
        # Microsoft's download page for it (id 56519) is the stable address and links
        # the current file. A direct JSON URL (a mirror) works too.
        urls=("https://www.microsoft.com/en-us/download/details.aspx?id=56519",),
        parser=formats.azure_service_tags,
        evidence="hosting",
        reason="cloud:azure",
        provider="Azure",
        stale_after=3 * DAY,  # Microsoft publishes weekly; a week-old copy is still current
        min_prefixes=1000,  # tens of thousands
        max_bytes=32 * MIB,  # about 4 MB today
        locate=formats.azure_download_link,
        description="Azure service tags (public cloud)",
    ),
    FeedSpec(
        name="oracle",
        urls=("https://docs.oracle.com/en-us/iaas/tools/public_ip_ranges.json",),
        parser=formats.oracle_cloud,
        evidence="hosting",
        reason="cloud:oracle",
        provider="Oracle Cloud",
        min_prefixes=50,
        max_bytes=8 * MIB,
        description="Oracle Cloud public_ip_ranges.json",
    ),
    FeedSpec(
        name="cloudflare",
        urls=("https://www.cloudflare.com/ips-v4", "https://www.cloudflare.com/ips-v6"),
        parser=formats.text_list,
        evidence="hosting",
        reason="cloud:cloudflare",
        provider="Cloudflare",
        stale_after=7 * DAY,  # changes a few times a decade
        min_prefixes=10,  # 15 IPv4 + 7 IPv6 prefixes
        max_bytes=1 * MIB,
        description="Cloudflare ips-v4 and ips-v6",
    ),
    FeedSpec(
        name="digitalocean",
        urls=("https://digitalocean.com/geo/google.csv",),
        parser=formats.geofeed_csv,
        evidence="hosting",
        reason="cloud:digitalocean",
        provider="DigitalOcean",
        min_prefixes=100,
        max_bytes=8 * MIB,
        description="DigitalOcean geofeed (RFC 8805 CSV)",
    ),
    FeedSpec(
        name="vpn",
        urls=(f"{_X4B}/vpn/ipv4.txt", f"{_X4B}/vpn/ipv6.txt"),
        parser=formats.text_list,
        evidence="vpn",
        reason="vpn-range:x4bnet",
        exact=False,
        min_prefixes=100,
        max_bytes=16 * MIB,
        description="X4BNet lists_vpn: known VPN networks",
    ),
    FeedSpec(
        name="datacenter",
        urls=(f"{_X4B}/datacenter/ipv4.txt", f"{_X4B}/datacenter/ipv6.txt"),
        parser=formats.text_list,
        # The list holds VPN networks too, but does not say which: it is evidence of hosting only.
        evidence="hosting",
        reason="datacenter:x4bnet",
        exact=False,
        min_prefixes=1000,
        max_bytes=32 * MIB,
        description="X4BNet lists_vpn: datacenter and VPN networks",
    ),
    FeedSpec(
        name="relay",
        urls=("https://mask-api.icloud.com/egress-ip-ranges.csv",),
        parser=formats.icloud_relay_csv,
        # A relay hides its user like a VPN would, but it is Apple's service for its
        # customers' browsing: a flag of its own (isRelay), not isVpn, isProxy or isHosting.
        evidence="relay",
        reason="relay:icloud",
        provider="iCloud Private Relay",
        min_prefixes=20_000,  # the real file has about 287,000 rows: fewer than this is a broken answer
        max_bytes=64 * MIB,  # about 12 MB
        description="Apple iCloud Private Relay egress ranges",
    ),
)

# VPN providers' own server lists, one feed per provider (the feed's name is the provider's key).
# Only first-party data: an address there is one the provider itself publishes as its server (the
# address clients connect to), so it is exact evidence and names the VPN. Where a provider's entry
# and exit addresses differ, its exits are loaded too, and the entries are not called exits
# (docs/CONFIGURATION.md#vpn-detection-feeds).
# - Joe12387/open-source-vpn-ip-lists (CC0 1.0): ten providers, rebuilt daily from each provider's
#   own server-list API, one address per line.
# - tn3w/ProtonVPN-IPs and tn3w/TunnelBear-IPs (Apache-2.0): rebuilt daily from Proton's API (its
#   ExitIP fields: Proton's entries and exits differ, and the list above holds mostly entries) and
#   from TunnelBear's.
_SERVER_LISTS = "https://raw.githubusercontent.com/Joe12387/open-source-vpn-ip-lists/HEAD"
_TN3W = "https://raw.githubusercontent.com/tn3w"


@dataclass(frozen=True)
class VpnProvider:
    key: str  # the feed's name (and the list's file name at open-source-vpn-ip-lists)
    name: str  # the VPN as a verdict's provider names it
    min_servers: int  # about a fifth of the list's size in 2026: fewer is a broken answer
    urls: tuple[str, ...] = ()  # the sources; () means open-source-vpn-ip-lists' <key>.txt
    # Whether the subnets its servers cluster in count as its network: not for a fleet of cloud
    # instances (TunnelBear's stand in Linode's and DigitalOcean's shared /24s).
    subnets: bool = True

    @property
    def sources(self) -> tuple[str, ...]:
        return self.urls or (f"{_SERVER_LISTS}/{self.key}.txt",)


VPN_PROVIDERS: tuple[VpnProvider, ...] = (
    VpnProvider("nordvpn", "NordVPN", 1500),  # about 8,500-9,500 IPv4 addresses
    VpnProvider(  # about 1,400 (mostly entries) + 2,400 exits
        "protonvpn",
        "Proton VPN",
        250,
        (f"{_SERVER_LISTS}/protonvpn.txt", f"{_TN3W}/ProtonVPN-IPs/HEAD/protonvpn_ips.txt"),
    ),
    VpnProvider("pia", "Private Internet Access", 250),  # about 1,200-1,500
    VpnProvider("airvpn", "AirVPN", 400),  # about 1,000 IPv4 + 1,000 IPv6
    VpnProvider("mullvad", "Mullvad", 200),  # about 570 IPv4 + 560 IPv6
    VpnProvider("windscribe", "Windscribe", 200),  # about 1,000
    VpnProvider("surfshark", "Surfshark", 50),  # about 280
    VpnProvider("ivpn", "IVPN", 50),  # about 260
    VpnProvider("ovpn", "OVPN", 20),  # about 100
    VpnProvider("riseupvpn", "RiseupVPN", 5),  # about 20
    VpnProvider(  # about 6,000
        "tunnelbear", "TunnelBear", 1000, (f"{_TN3W}/TunnelBear-IPs/HEAD/tunnelbear_ips.txt",), subnets=False
    ),
)

PROVIDER_FEEDS: tuple[FeedSpec, ...] = tuple(
    FeedSpec(
        name=provider.key,
        urls=provider.sources,
        parser=formats.vpn_server_list if provider.subnets else formats.vpn_servers_only,
        evidence="vpn",
        reason=f"vpn-server:{provider.key}",
        network_reason=f"vpn-subnet:{provider.key}",  # a /24 or /64 holding two or more of its servers
        provider=provider.name,
        min_prefixes=provider.min_servers,
        max_bytes=8 * MIB,  # NordVPN's, the largest, is about 130 kB
        description=f"{provider.name}'s published servers",
    )
    for provider in VPN_PROVIDERS
)

DEFAULT_FEEDS = DEFAULT_FEEDS + PROVIDER_FEEDS

FEED_NAMES: tuple[str, ...] = tuple(spec.name for spec in DEFAULT_FEEDS)
