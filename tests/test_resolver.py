"""The shared resolver against a real DNS server on 127.0.0.1 (UDP and TCP)."""

from __future__ import annotations

import asyncio
import time

import pytest

from ipintel.infra.resolver import (
    DnsRecord,
    NxDomain,
    QueryTimeout,
    Resolver,
    ResolverError,
    ServerFailure,
    server_address,
)
from tests.support.dns_server import Answer, DnsServer, free_udp_tcp_port


async def test_every_record_type_in_text_form(dns: DnsServer, resolver: Resolver) -> None:
    dns.add("example.com", "A", "93.184.215.14", ttl=120)
    dns.add("example.com", "AAAA", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    dns.add("example.com", "MX", "10 mx1.example.com")
    dns.add("example.com", "MX", "20 mx2.example.com")
    dns.add("example.com", "NS", "a.iana-servers.net")
    dns.add("example.com", "TXT", ["v=spf1 ", "include:_spf.example.com ", "-all"])
    dns.add("alias.example.com", "CNAME", "example.com")
    dns.add_ptr("192.0.2.1", "host.example.com")

    assert await resolver.query("example.com", "A") == [DnsRecord("example.com", "A", 120, "93.184.215.14")]
    assert await resolver.query("example.com", "aaaa") == [
        DnsRecord("example.com", "AAAA", 300, "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    ]
    mx = await resolver.query("example.com", "MX")
    assert sorted(r.data for r in mx) == ["10 mx1.example.com", "20 mx2.example.com"]
    assert [r.data for r in await resolver.query("example.com", "NS")] == ["a.iana-servers.net"]
    # The character strings of one TXT record are joined without a separator.
    assert [r.data for r in await resolver.query("example.com", "TXT")] == ["v=spf1 include:_spf.example.com -all"]
    assert await resolver.query("alias.example.com", "CNAME") == [
        DnsRecord("alias.example.com", "CNAME", 300, "example.com")
    ]
    assert await resolver.query("1.2.0.192.in-addr.arpa", "PTR") == [
        DnsRecord("1.2.0.192.in-addr.arpa", "PTR", 300, "host.example.com")
    ]


async def test_cname_chain_comes_before_the_final_records(dns: DnsServer, resolver: Resolver) -> None:
    dns.add("www.example.org", "CNAME", "edge.cdn.example.net")
    dns.add("edge.cdn.example.net", "CNAME", "origin.example.net")
    dns.add("origin.example.net", "A", "198.51.100.7")
    dns.add("origin.example.net", "A", "198.51.100.8")

    records = await resolver.query("www.example.org", "A")

    assert [(r.name, r.type, r.data) for r in records[:2]] == [
        ("www.example.org", "CNAME", "edge.cdn.example.net"),
        ("edge.cdn.example.net", "CNAME", "origin.example.net"),
    ]
    assert sorted((r.name, r.type, r.data) for r in records[2:]) == [
        ("origin.example.net", "A", "198.51.100.7"),
        ("origin.example.net", "A", "198.51.100.8"),
    ]


async def test_large_answer_truncated_over_udp_comes_back_over_tcp(dns: DnsServer, resolver: Resolver) -> None:
    big = "k=" + "x" * 3000  # far over any UDP buffer c-ares offers
    dns.add("big.example.com", "TXT", big)

    records = await resolver.query("big.example.com", "TXT")

    assert [r.data for r in records] == [big]
    transports = [q.transport for q in dns.queries if q.name == "big.example.com"]
    assert transports == ["udp", "tcp"]


async def test_nodata_is_an_empty_list_and_nxdomain_raises(dns: DnsServer, resolver: Resolver) -> None:
    dns.add("example.com", "A", "93.184.215.14")
    dns.add("deep.sub.example.com", "A", "93.184.215.15")

    assert await resolver.query("example.com", "MX") == []
    assert await resolver.query("sub.example.com", "A") == []  # an empty non-terminal exists
    with pytest.raises(NxDomain):
        await resolver.query("missing.example.com", "A")


async def test_servfail_and_refused_carry_the_rcode(dns: DnsServer, resolver: Resolver) -> None:
    dns.servfail("broken.test")
    dns.refuse("refused.test")

    with pytest.raises(ServerFailure) as servfail:
        await resolver.query("a.broken.test", "A")
    with pytest.raises(ServerFailure) as refused:
        await resolver.query("refused.test", "TXT")

    assert servfail.value.rcode == "SERVFAIL"
    assert refused.value.rcode == "REFUSED"


async def test_a_silent_server_times_out_at_the_deadline(dns: DnsServer) -> None:
    dns.blackhole("silent.test")

    async with Resolver(dns.servers, timeout=10.0) as resolver:
        started = time.perf_counter()
        with pytest.raises(QueryTimeout):
            await resolver.query("silent.test", "A", timeout=0.3)
        elapsed = time.perf_counter() - started

    # Not before the call's deadline; and before the resolver's own 10 s (a loaded machine only adds).
    assert 0.25 < elapsed < 10.0


async def test_a_slow_but_live_server_gets_the_whole_deadline(dns: DnsServer, resolver: Resolver) -> None:
    # c-ares learns a fast server's latency and shortens its own per-try
    # timeout to 250 ms; an answer that takes longer must still arrive
    # within our deadline.
    for i in range(5):
        dns.add(f"fast{i}.test", "A", "192.0.2.1")
        await resolver.query(f"fast{i}.test", "A")
    dns.add("slow.test", "A", "192.0.2.2", ttl=0)
    dns.slow("slow.test", 0.35)

    records = await resolver.query("slow.test", "A", timeout=1.5)

    assert [r.data for r in records] == ["192.0.2.2"]


async def test_nothing_listening_is_a_fast_server_failure() -> None:
    port = free_udp_tcp_port()
    async with Resolver((("127.0.0.1", port),), timeout=10.0) as resolver:
        started = time.perf_counter()
        with pytest.raises(ServerFailure) as failure:
            await resolver.query("example.com", "A")
    assert failure.value.rcode == "CONNREFUSED"
    assert time.perf_counter() - started < 10.0  # before the timeout could have ended it


async def test_concurrent_queries_are_answered_concurrently(dns: DnsServer, resolver: Resolver) -> None:
    dns.delay = 0.1  # well under c-ares's first try (250 ms), even on a loaded machine: else asked again
    dns.hook(lambda name, qtype: Answer.a(name, "127.0.0.2", ttl=0) if name.endswith(".bl.test") else None)

    started = time.perf_counter()
    results = await asyncio.gather(*(resolver.query(f"{i}.bl.test", "A", timeout=2.0) for i in range(40)))
    elapsed = time.perf_counter() - started

    assert all([r.data for r in result] == ["127.0.0.2"] for result in results)
    assert dns.count("bl.test", suffix=True) == 40
    assert elapsed < 0.1 * 40 / 2  # about 0.1 s; one after another would take 4 s: half that cannot be reached


async def test_every_query_is_counted_by_outcome(dns: DnsServer, resolver: Resolver) -> None:
    dns.add("ok.test", "A", "192.0.2.1")
    dns.servfail("servfail.test")
    dns.refuse("refused.test")
    dns.blackhole("silent.test")
    for name in ("ok.test", "missing.test", "servfail.test", "refused.test", "silent.test"):
        try:
            await resolver.query(name, "A", timeout=0.3)
        except ResolverError:  # only the counters matter here
            pass
    await resolver.query("ok.test", "A", source="dnsbl")

    assert resolver.stats.calls == {
        ("dns", "ok"): 1,
        ("dns", "nxdomain"): 1,
        ("dns", "servfail"): 1,
        ("dns", "refused"): 1,
        ("dns", "timeout"): 1,
        ("dnsbl", "ok"): 1,
    }


async def test_unicode_txt_and_idn_owner_names(dns: DnsServer, resolver: Resolver) -> None:
    dns.add("xn--bcher-kva.example", "TXT", "grüße".encode())
    dns.add("xn--bcher-kva.example", "A", "192.0.2.9")

    assert [r.data for r in await resolver.query("xn--bcher-kva.example", "TXT")] == ["grüße"]
    assert [r.name for r in await resolver.query("xn--bcher-kva.example", "A")] == ["xn--bcher-kva.example"]


def test_server_addresses_in_c_ares_form() -> None:
    assert server_address("127.0.0.1", 5353) == "127.0.0.1:5353"
    assert server_address("::1", 53) == "[::1]:53"


async def test_configured_servers_with_ports_are_used(dns: DnsServer) -> None:
    async with Resolver(dns.servers) as resolver:
        assert resolver.nameservers == [f"127.0.0.1:{dns.port}"]


async def test_query_before_start_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError):
        await Resolver().query("example.com", "A")
    async with Resolver((("127.0.0.1", 53),)) as resolver:
        with pytest.raises(ValueError):
            await resolver.query("example.com", "ANYTHING")


async def test_channel_is_renewed_so_the_c_ares_cache_stays_bounded(dns: DnsServer) -> None:
    """c-ares caches answers per channel without an entry limit; the resolver
    replaces its channel every N queries, and answers keep coming across it."""
    dns.add("a.example", "A", "192.0.2.1", ttl=3600)
    resolver = Resolver(dns.servers, timeout=1.0, rotate_after_queries=3)
    await resolver.start()
    try:
        answers = [await resolver.query("a.example", "A") for _ in range(8)]
        assert all(a[0].data == "192.0.2.1" for a in answers)
        assert resolver.rotations == 2
        # A renewed channel has an empty cache: it asked the server again.
        assert dns.count("a.example", "A") == 3
    finally:
        await resolver.close()
