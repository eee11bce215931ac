"""Signal sources and the verdict rule (docs/API.md#vpn-detection), each source against its real data shape."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipintel.capabilities.asn import MmdbAsnSource
from ipintel.capabilities.vpn import (
    AnonymousIpSource,
    AsnClasses,
    AsnClassSource,
    ConnectionTypeSource,
    Kind,
    Naming,
    PtrKeywordSource,
    Signal,
    Strength,
    verdict,
)
from ipintel.capabilities.vpn.asn_classes import parse_asn_entries, parse_asn_list
from ipintel.capabilities.vpn.ptr import keyword_signals
from ipintel.infra.mmdb import MmdbFile
from ipintel.infra.resolver import Resolver
from tests.support.dns_server import DnsServer
from tests.support.mmdb import write_mmdb

ip = ipaddress.ip_address
ADDRESS = ip("198.51.100.1")


def reasons(signals: object) -> list[str]:
    return [s.reason for s in signals]  # type: ignore[attr-defined]


# The verdict rule ------------------------------------------------------------------


def test_tor_exit_on_the_list_is_a_high_confidence_proxy_and_vpn() -> None:
    record = verdict(ADDRESS, [Signal(Kind.TOR, Strength.EXACT, "tor-exit")], complete=False)
    assert record == {
        "ip": "198.51.100.1",
        "isVpn": True,
        "isProxy": True,
        "isHosting": False,
        "isMobile": False,
        "isTor": True,
        "isRelay": False,
        "provider": None,
        "confidence": "high",
        "reasons": ["tor-exit"],
    }


def test_vpn_operator_network_is_medium() -> None:
    record = verdict(ADDRESS, [Signal(Kind.VPN, Strength.NETWORK, "asn-vpn:AS209854")], complete=True)
    assert (record["isVpn"], record["isProxy"], record["isTor"], record["confidence"]) == (True, False, False, "medium")


def test_heuristics_alone_are_low_even_with_every_source_fresh() -> None:
    record = verdict(ADDRESS, [Signal(Kind.VPN, Strength.HEURISTIC, "ptr:vpn")], complete=True)
    assert record["isVpn"] is True and record["confidence"] == "low"


def test_the_strongest_anonymising_signal_sets_confidence() -> None:
    found = [
        Signal(Kind.VPN, Strength.HEURISTIC, "ptr:vpn"),
        Signal(Kind.HOSTING, Strength.NETWORK, "cloud:aws"),
        Signal(Kind.VPN, Strength.NETWORK, "vpn-range:x4bnet"),
        Signal(Kind.VPN, Strength.EXACT, "anonymous-db:vpn"),
    ]
    record = verdict(ADDRESS, found, complete=False)
    assert record["confidence"] == "high"
    # Strongest first, every signal named once, ties in the sources' order.
    assert record["reasons"] == ["anonymous-db:vpn", "cloud:aws", "vpn-range:x4bnet", "ptr:vpn"]


def test_hosting_alone_is_not_anonymisation() -> None:
    found = [
        Signal(Kind.HOSTING, Strength.NETWORK, "cloud:aws"),
        Signal(Kind.HOSTING, Strength.NETWORK, "asn-hosting:AS16509"),
    ]
    record = verdict(ADDRESS, found, complete=True)
    assert (record["isHosting"], record["isVpn"], record["isProxy"]) == (True, False, False)
    assert record["confidence"] == "medium"  # a negative verdict with every source fresh


def test_a_negative_verdict_drops_to_low_when_a_source_is_missing_or_stale() -> None:
    assert verdict(ADDRESS, [], complete=True)["confidence"] == "medium"
    assert verdict(ADDRESS, [], complete=False)["confidence"] == "low"
    # Mobile evidence does not make the negative verdict stronger or weaker.
    record = verdict(ADDRESS, [Signal(Kind.MOBILE, Strength.NETWORK, "asn-mobile:AS21928")], complete=False)
    assert (record["isMobile"], record["isVpn"], record["confidence"]) == (True, False, "low")


RELAY = Signal(Kind.RELAY, Strength.NETWORK, "relay:icloud", "iCloud Private Relay", Naming.SERVICE)


def test_a_relay_address_is_a_relay_and_nothing_else() -> None:
    record = verdict(ADDRESS, [RELAY], complete=True)
    assert {k: v for k, v in record.items() if k != "ip"} == {
        "isVpn": False,
        "isProxy": False,
        "isHosting": False,
        "isMobile": False,
        "isTor": False,
        "isRelay": True,
        "provider": "iCloud Private Relay",
        "confidence": "medium",  # a negative isVpn, every source fresh: relay evidence neither raises nor lowers it
        "reasons": ["relay:icloud"],
    }
    assert verdict(ADDRESS, [RELAY], complete=False)["confidence"] == "low"


def test_a_relay_overrules_network_level_and_heuristic_anonymity_signals() -> None:
    # Apple's list says what the prefix is for; a third-party prefix or AS that lumps it in with VPNs
    # (X4BNet's VPN list takes Apple's ranges as an input) does not make a Safari user a VPN.
    listed = Signal(Kind.VPN, Strength.NETWORK, "vpn-range:x4bnet")
    as_listed = Signal(Kind.VPN, Strength.NETWORK, "asn-vpn:AS9009", "M247", Naming.AS_LIST)
    keyword = Signal(Kind.PROXY, Strength.HEURISTIC, "ptr:proxy")
    record = verdict(ADDRESS, [RELAY, listed, as_listed, keyword], complete=True)
    assert (record["isRelay"], record["isVpn"], record["isProxy"], record["isTor"]) == (True, False, False, False)
    assert record["confidence"] == "medium"  # a negative isVpn with every source fresh
    assert record["provider"] == "iCloud Private Relay"
    assert record["reasons"] == ["relay:icloud", "vpn-range:x4bnet", "asn-vpn:AS9009", "ptr:proxy"]  # still shown
    # Without the relay evidence the same listing is a VPN network, as before.
    alone = verdict(ADDRESS, [listed], complete=True)
    assert (alone["isVpn"], alone["confidence"]) == (True, "medium")
    # Exact evidence about the address itself keeps its weight, relay or not.
    exact = Signal(Kind.VPN, Strength.EXACT, "anonymous-db:vpn")
    record = verdict(ADDRESS, [RELAY, listed, exact], complete=True)
    assert (record["isRelay"], record["isVpn"], record["confidence"]) == (True, True, "high")
    # A datacenter listing of a relay's block is hosting evidence of its own.
    hosting = Signal(Kind.HOSTING, Strength.NETWORK, "datacenter:x4bnet")
    record = verdict(ADDRESS, [RELAY, hosting], complete=True)
    assert (record["isRelay"], record["isHosting"], record["isVpn"]) == (True, True, False)
    assert record["confidence"] == "medium"


def test_a_providers_own_server_list_is_exact_and_names_the_vpn() -> None:
    server = Signal(Kind.VPN, Strength.EXACT, "vpn-server:nordvpn", "NordVPN", Naming.SERVICE)
    network = Signal(Kind.VPN, Strength.NETWORK, "vpn-range:x4bnet")
    hosting_as = Signal(Kind.HOSTING, Strength.NETWORK, "asn-hosting:AS9009", "M247", Naming.AS_LIST)
    cloud = Signal(Kind.HOSTING, Strength.NETWORK, "cloud:aws", "AWS us-east-1", Naming.PUBLISHED)
    # Network-level evidence only: medium, and the hosting company is all that is named.
    record = verdict(ADDRESS, [network, hosting_as], complete=True)
    assert (record["isVpn"], record["confidence"], record["provider"]) == (True, "medium", "M247")
    # The provider's own list: high, and the VPN is named, ahead of the network's owner or a cloud.
    for others in ([network, hosting_as], [hosting_as, cloud], []):
        record = verdict(ADDRESS, [*others, server], complete=True)
        assert (record["isVpn"], record["confidence"], record["provider"]) == (True, "high", "NordVPN"), others
        assert record["reasons"][0] == "vpn-server:nordvpn"  # strongest first
    assert verdict(ADDRESS, [cloud, server], complete=True)["isHosting"] is True  # its own evidence, still shown


def test_provider_is_named_by_the_most_direct_signal() -> None:
    asn = Signal(Kind.HOSTING, Strength.NETWORK, "asn-hosting:AS16509", "Amazon", Naming.AS_LIST)
    cloud = Signal(Kind.HOSTING, Strength.NETWORK, "cloud:aws", "AWS us-east-1", Naming.PUBLISHED)
    anonymous = Signal(Kind.VPN, Strength.EXACT, "anonymous-db:vpn")  # strong evidence, names nobody
    assert verdict(ADDRESS, [anonymous], complete=True)["provider"] is None
    assert verdict(ADDRESS, [anonymous, asn], complete=True)["provider"] == "Amazon"
    assert verdict(ADDRESS, [asn, cloud], complete=True)["provider"] == "AWS us-east-1"
    assert verdict(ADDRESS, [cloud, RELAY, asn], complete=True)["provider"] == "iCloud Private Relay"
    assert verdict(ADDRESS, [], complete=True)["provider"] is None


def test_proxy_without_tor() -> None:
    record = verdict(ADDRESS, [Signal(Kind.PROXY, Strength.EXACT, "anonymous-db:residential-proxy")], complete=True)
    assert (record["isProxy"], record["isVpn"], record["isTor"]) == (True, True, False)


# MaxMind databases ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def anonymous_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MmdbFile]:
    path = write_mmdb(
        tmp_path_factory.mktemp("anon") / "anonymous.mmdb",
        "GeoIP2-Anonymous-IP",
        {
            "146.70.0.0/16": {"is_anonymous": True, "is_anonymous_vpn": True, "is_hosting_provider": True},
            "73.1.2.3/32": {"is_anonymous": True, "is_residential_proxy": True},
            "185.220.101.1/32": {"is_anonymous": True, "is_tor_exit_node": True, "is_public_proxy": True},
            "2a02:6ea0::/29": {"is_anonymous": True, "is_anonymous_vpn": True},
        },
    )
    db = MmdbFile(path, kind="anonymous")
    assert db.load()
    yield db
    db.close()


async def test_anonymous_ip_database(anonymous_db: MmdbFile) -> None:
    source = AnonymousIpSource(anonymous_db)
    found = await source.signals(ip("146.70.5.5"))
    assert reasons(found) == ["anonymous-db:vpn", "anonymous-db:hosting"]
    assert all(s.strength is Strength.EXACT for s in found)
    assert reasons(await source.signals(ip("73.1.2.3"))) == ["anonymous-db:residential-proxy"]
    assert reasons(await source.signals(ip("185.220.101.1"))) == ["anonymous-db:tor-exit", "anonymous-db:public-proxy"]
    assert reasons(await source.signals(ip("2a02:6ea0:1::1"))) == ["anonymous-db:vpn"]
    assert await source.signals(ip("81.2.69.160")) == ()
    assert source.complete()


async def test_an_unconfigured_or_unloadable_database_is_no_signal(tmp_path: Path) -> None:
    assert await AnonymousIpSource(None).signals(ADDRESS) == ()
    assert AnonymousIpSource(None).complete()  # not configured: not a source
    broken = MmdbFile(tmp_path / "missing.mmdb", kind="anonymous")
    broken.load()
    assert await AnonymousIpSource(broken).signals(ADDRESS) == ()
    assert not AnonymousIpSource(broken).complete()  # configured but not loaded: a negative is less sure
    assert not ConnectionTypeSource(broken).complete()


async def test_connection_type_database(tmp_path: Path) -> None:
    path = write_mmdb(
        tmp_path / "connection.mmdb",
        "GeoIP2-Connection-Type",
        {
            "172.58.0.0/16": {"connection_type": "Cellular"},
            "12.0.0.0/16": {"connection_type": "Cable/DSL"},
            "8.8.8.0/24": {"connection_type": "Corporate"},
        },
    )
    db = MmdbFile(path, kind="connection")
    assert db.load()
    source = ConnectionTypeSource(db)
    found = await source.signals(ip("172.58.1.1"))
    assert [(s.kind, s.reason) for s in found] == [(Kind.MOBILE, "connection-type:cellular")]
    assert await source.signals(ip("12.0.0.1")) == ()
    assert await source.signals(ip("8.8.8.8")) == ()
    db.close()


# Curated ASN classes -------------------------------------------------------------------------


def test_shipped_asn_classes_load_and_hold_the_documented_facts() -> None:
    classes = AsnClasses.shipped()
    assert {16509, 14618, 15169, 8075, 14061, 9009} <= classes.hosting
    assert {21928, 6167, 22394} <= classes.mobile
    assert 209854 in classes.vpn
    assert 9009 not in classes.vpn  # M247 is hosting, not a VPN operator
    # Every listed AS has an operator's name, the verdict's provider.
    assert set(classes.names) == classes.hosting | classes.vpn | classes.mobile
    assert (classes.names[16509], classes.names[9009], classes.names[209854]) == ("Amazon", "M247", "Surfshark")
    assert (classes.names[136787], classes.names[21928], classes.names[20057]) == (
        "NordVPN",
        "T-Mobile US",
        "AT&T Mobility LLC",
    )
    assert not (classes.vpn & classes.hosting) and not (classes.mobile & (classes.vpn | classes.hosting))


def test_asn_list_parsing() -> None:
    assert parse_asn_list("# header\nAS1 one  # note\nas2 two\n\n") == {1, 2}
    assert parse_asn_entries(
        "AS16509   Amazon | AMAZON-02 - Amazon.com, Inc., US   [x4b]\nAS209854  Surfshark\nAS7  [docs]\nAS8 Eight # c\n"
    ) == {16509: "Amazon", 209854: "Surfshark", 7: "", 8: "Eight"}
    with pytest.raises(ValueError, match="line 2"):
        parse_asn_list("AS1\n16509 no prefix\n")


async def test_asn_classes_from_the_address_as(tmp_path: Path) -> None:
    path = write_mmdb(
        tmp_path / "asn.mmdb",
        "GeoLite2-ASN",
        {
            "172.58.0.0/16": {
                "autonomous_system_number": 21928,
                "autonomous_system_organization": "T-Mobile USA, Inc.",
            },
            "3.5.140.0/22": {"autonomous_system_number": 16509, "autonomous_system_organization": "Amazon.com, Inc."},
            "45.87.212.0/22": {"autonomous_system_number": 209854, "autonomous_system_organization": "Surfshark Ltd."},
            "81.2.69.0/24": {
                "autonomous_system_number": 20712,
                "autonomous_system_organization": "Andrews & Arnold Ltd",
            },
        },
    )
    db = MmdbFile(path, kind="asn")
    assert db.load()
    source = AsnClassSource(MmdbAsnSource(db), AsnClasses.shipped(), local=True)
    assert [(s.kind, s.reason) for s in await source.signals(ip("172.58.1.1"))] == [(Kind.MOBILE, "asn-mobile:AS21928")]
    assert reasons(await source.signals(ip("3.5.140.2"))) == ["asn-hosting:AS16509"]
    vpn = await source.signals(ip("45.87.212.9"))
    assert [(s.kind, s.strength, s.reason) for s in vpn] == [(Kind.VPN, Strength.NETWORK, "asn-vpn:AS209854")]
    # The operator's name comes from the shipped list, not from the database's organisation field.
    assert [(s.provider, s.naming) for s in vpn] == [("Surfshark", Naming.AS_LIST)]
    assert [s.provider for s in await source.signals(ip("3.5.140.2"))] == ["Amazon"]
    assert await source.signals(ip("81.2.69.160")) == []
    assert await source.signals(ip("9.9.9.9")) == ()  # no AS known
    db.close()


# Reverse-DNS keywords ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("tor-exit-3.example.org", ["ptr:tor-exit"]),
        ("torexit01.example.net", ["ptr:tor-exit"]),
        ("vpn12.example.com", ["ptr:vpn"]),
        ("de123.nordvpn.com", ["ptr:vpn"]),
        ("proxy-3.example.net", ["ptr:proxy"]),
        ("174.sub-70-195-74.myvzw.com", ["ptr:mobile"]),
        ("mobile-166-170-1-2.mycingular.net", ["ptr:mobile"]),
        ("ec2-3-5-140-2.compute-1.amazonaws.com", ["ptr:hosting"]),
        ("static.88-198-1-2.clients.your-server.de", ["ptr:hosting"]),
        ("host-81-2-69-160.as20712.net", []),
        ("tor.example.org", []),  # a relay is not an exit
        ("evpnet.example.com", []),  # "vpn" in the middle of a word
        ("notmyvzw.com", []),  # not under the carrier's domain
    ],
)
def test_keywords(host: str, expected: list[str]) -> None:
    assert reasons(keyword_signals(host)) == expected
    assert all(s.strength is Strength.HEURISTIC for s in keyword_signals(host))


async def test_ptr_keywords_through_the_resolver(dns: DnsServer, resolver: Resolver) -> None:
    dns.add_ptr("37.19.200.77", "vpn-nl-12.example.net")
    dns.add_ptr("2a02:6ea0:1000::5", "proxy1.example.net")
    dns.add_ptr("81.2.69.160", "host.example.net")
    source = PtrKeywordSource(resolver, timeout=0.5)
    assert reasons(await source.signals(ip("37.19.200.77"))) == ["ptr:vpn"]
    assert reasons(await source.signals(ip("2a02:6ea0:1000::5"))) == ["ptr:proxy"]
    assert await source.signals(ip("81.2.69.160")) == []
    assert dns.count(suffix=False) >= 3
    assert source.complete()


async def test_ptr_failures_are_no_signal(dns: DnsServer, resolver: Resolver) -> None:
    dns.servfail("1.51.198.in-addr.arpa")
    dns.blackhole("2.51.198.in-addr.arpa")
    source = PtrKeywordSource(resolver, timeout=0.3)
    assert await source.signals(ip("198.51.1.9")) == ()  # SERVFAIL
    assert await source.signals(ip("198.51.2.9")) == ()  # timeout
    assert await source.signals(ip("198.51.3.9")) == ()  # NXDOMAIN
