"""Blacklist check (docs/API.md#blacklist): answer validation, RFC 5782 self-tests, the deadline.

DNSBLs are served by a real DNS server on 127.0.0.1 (tests/support/dns_server.py)
with zones that behave like the real failure modes (tests/support/dnsbl.py),
and the resolver is the service's own: nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipintel.capabilities import blacklist
from ipintel.capabilities.blacklist import SelfTests, Zone, build_zones, classify_answer, overall_status, self_test
from ipintel.capabilities.reputation import SourceResult
from ipintel.infra.resolver import DnsRecord, Resolver
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import AD_SERVER, answers_everything, healthy_list, query_name, rewrites_nxdomain

LISTED_IP = "45.33.32.156"  # listed by the healthy test lists
CLEAN_IP = "8.8.8.8"


def records(*addresses: str, name: str = "x") -> list[DnsRecord]:
    return [DnsRecord(name, "A", 0, a) for a in addresses]


def zone(name: str) -> Zone:
    (built,) = build_zones([name])
    return built


# Answer validation -------------------------------------------------------------------


def test_documented_code_is_listed_with_its_meaning() -> None:
    result = classify_answer(zone("zen.spamhaus.org"), records("127.0.0.4"))
    assert result == SourceResult("zen.spamhaus.org", "listed", "XBL: exploited or infected host (127.0.0.4)")
    assert result.listed is True


def test_several_codes_are_all_named() -> None:
    result = classify_answer(zone("zen.spamhaus.org"), records("127.0.0.2", "127.0.0.9", "127.0.0.10"))
    assert result.status == "listed"
    assert result.detail is not None
    for words in ("SBL: spam source", "SBL DROP", "PBL"):
        assert words in result.detail


def test_dronebl_names_proxies_and_vpns() -> None:
    dronebl = zone("dnsbl.dronebl.org")
    assert classify_answer(dronebl, records("127.0.0.19")).detail == "abused VPN service (127.0.0.19)"
    assert classify_answer(dronebl, records("127.0.0.8")).detail == "open SOCKS proxy (127.0.0.8)"


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("127.255.255.254", "public or open resolver"),
        ("127.255.255.252", "typo in the DNSBL zone name"),
        ("127.255.255.255", "excessive number of queries"),
        ("127.255.255.250", "error code about the query"),
    ],
)
def test_spamhaus_error_codes_are_unavailable_and_named(answer: str, words: str) -> None:
    result = classify_answer(zone("zen.spamhaus.org"), records(answer))
    assert result.status == "unavailable"
    assert result.listed is None
    assert answer in (result.detail or "") and words in (result.detail or "")


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("127.0.0.1", "never listed"),
        (AD_SERVER, "rewrites NXDOMAIN"),
        ("10.0.0.1", "outside 127.0.0.0/8"),
        ("127.255.255.1", "127.255.255.0/24"),
    ],
)
def test_invalid_answers_are_unavailable(answer: str, words: str) -> None:
    result = classify_answer(zone("bl.spamcop.net"), records(answer))
    assert result.status == "unavailable"
    assert words in (result.detail or "")


def test_undocumented_code_of_a_documented_list_is_unavailable() -> None:
    result = classify_answer(zone("bl.spamcop.net"), records("127.0.0.3"))
    assert result.status == "unavailable"
    assert "not one of the return codes" in (result.detail or "")


def test_list_without_a_code_table_accepts_any_valid_code() -> None:
    result = classify_answer(zone("all.s5h.net"), records("127.0.0.3"))
    assert result == SourceResult("all.s5h.net", "listed", "return code 127.0.0.3")


def test_one_bad_record_spoils_the_answer() -> None:
    result = classify_answer(zone("zen.spamhaus.org"), records("127.0.0.2", "127.255.255.254"))
    assert result.status == "unavailable"


def test_nodata_is_unavailable_and_cname_records_are_skipped() -> None:
    assert classify_answer(zone("psbl.surriel.com"), []).status == "unavailable"
    chained = [DnsRecord("x", "CNAME", 0, "y"), DnsRecord("y", "A", 0, "127.0.0.2")]
    assert classify_answer(zone("psbl.surriel.com"), chained).status == "listed"


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_only_the_listing_range_can_ever_be_listed(value: int) -> None:
    """Whatever a server answers, ``listed`` needs 127.0.0.2 - 127.255.254.255."""
    address = ipaddress.IPv4Address(value)
    result = classify_answer(zone("example-list.test"), records(str(address)))
    in_range = ipaddress.IPv4Address("127.0.0.2") <= address < ipaddress.IPv4Address("127.255.255.0")
    assert (result.status == "listed") == in_range
    assert result.status in ("listed", "unavailable")


# Zones ------------------------------------------------------------------------------------


def test_dqs_key_switches_spamhaus_without_showing_the_key() -> None:
    zones = build_zones(["zen.spamhaus.org", "bl.spamcop.net"], dqs_key="abc123secretkey")
    spamhaus, spamcop = zones
    assert spamhaus.name == "zen.dq.spamhaus.net"
    assert spamhaus.query_zone == "abc123secretkey.zen.dq.spamhaus.net"
    assert spamhaus.query_name(ipaddress.IPv4Address("1.2.3.4")) == "4.3.2.1.abc123secretkey.zen.dq.spamhaus.net"
    assert spamhaus.codes is not None and "127.0.0.4" in spamhaus.codes and spamhaus.spamhaus
    assert (spamcop.name, spamcop.query_zone) == ("bl.spamcop.net", "bl.spamcop.net")
    # Without a key the public zone is queried.
    assert build_zones(["zen.spamhaus.org"])[0].query_zone == "zen.spamhaus.org"


@pytest.mark.parametrize(
    ("zones", "key"),
    [(["not a zone"], None), (["single"], None), (["a" * 240 + ".test"], None), (["zen.spamhaus.org"], "bad.key")],
)
def test_unusable_configuration_is_refused(zones: list[str], key: str | None) -> None:
    with pytest.raises(blacklist.ZoneConfigError):
        build_zones(zones, dqs_key=key)


@pytest.mark.parametrize("zone", ["bl\n.example.test", "bl.example\n.test"])
def test_a_label_ending_in_a_newline_is_refused_like_one_ending_in_a_space(zone: str) -> None:
    # Python's "$" also matches before a final "\n": "bl\n" once passed as a DNS label.
    for bad in (zone, zone.replace("\n", " ")):
        with pytest.raises(blacklist.ZoneConfigError):
            build_zones([bad])


def test_duplicate_zones_are_asked_once() -> None:
    assert [z.name for z in build_zones(["bl.spamcop.net", "BL.SPAMCOP.NET."])] == ["bl.spamcop.net"]


# Top-level status ----------------------------------------------------------------------------


def test_overall_status() -> None:
    listed, clear, down = (SourceResult("a", s) for s in ("listed", "clear", "unavailable"))
    assert overall_status([clear, listed, down]) == "listed"
    assert overall_status([clear, clear]) == "clear"
    assert overall_status([clear, down]) == "unknown"
    assert overall_status([]) == "unknown"  # nothing answered: nothing is clear


def test_definitive_means_no_unavailable_source() -> None:
    assert blacklist.is_definitive({"sources": [{"status": "listed"}, {"status": "clear"}]})
    assert not blacklist.is_definitive({"sources": [{"status": "listed"}, {"status": "unavailable"}]})


# RFC 5782 self-tests against a real DNS server ----------------------------------------------------


async def test_self_test_passes_a_healthy_list(dns: DnsServer, resolver: Resolver) -> None:
    healthy_list(dns, "healthy.test")
    outcome = await self_test(zone("healthy.test"), resolver=resolver, timeout=0.5)
    assert outcome.verdict == "passed"
    assert dns.count(query_name("127.0.0.2", "healthy.test")) == 1
    assert dns.count(query_name("127.0.0.1", "healthy.test")) == 1
    # DNSBL queries are counted under their own source in the upstream statistics (/metrics).
    assert resolver.stats.calls[("dnsbl", "ok")] == 1 and resolver.stats.calls[("dnsbl", "nxdomain")] == 1


@pytest.mark.parametrize(
    ("setup", "verdict", "words"),
    [
        (lambda dns: answers_everything(dns, "z.test", "127.0.0.2"), "failed", "lists everything"),
        (lambda dns: None, "failed", "does not list the test address 127.0.0.2"),
        (lambda dns: rewrites_nxdomain(dns, "z.test"), "failed", "rewrites NXDOMAIN"),
        (lambda dns: answers_everything(dns, "z.test", "127.255.255.254"), "failed", "127.255.255.254"),
        (lambda dns: dns.blackhole("z.test"), "inconclusive", "no answer within"),
        (lambda dns: dns.servfail("z.test"), "inconclusive", "SERVFAIL"),
        (lambda dns: dns.refuse("z.test"), "inconclusive", "REFUSED"),
    ],
    ids=[
        "dead-lists-everything",
        "dead-lists-nothing",
        "nxdomain-rewrite",
        "error-code",
        "silent",
        "servfail",
        "refused",
    ],
)
async def test_self_test_catches_broken_lists(
    dns: DnsServer, setup: Callable[[DnsServer], None], verdict: str, words: str
) -> None:
    setup(dns)
    async with Resolver(dns.servers, timeout=0.2) as resolver:
        outcome = await self_test(zone("z.test"), resolver=resolver, timeout=0.2)
    assert outcome.verdict == verdict
    assert words in outcome.detail


async def test_self_tests_run_in_the_background_and_recover(dns: DnsServer, resolver: Resolver) -> None:
    answers_everything(dns, "flaky.test", "127.0.0.2")  # dead for now
    healthy_list(dns, "healthy.test")
    zones = build_zones(["flaky.test", "healthy.test"])
    tests = SelfTests(zones, resolver=resolver, timeout=1.0, interval=0.1, retry=0.1)
    flaky, healthy = zones
    started = time.perf_counter()
    tests.start()
    # start() never waits for the tests: it returned before either had a verdict (nothing has run yet); the
    # time is a bound on a hang only.
    assert tests.state(flaky) is None and tests.state(healthy) is None
    assert time.perf_counter() - started < 5
    try:
        await _until(lambda: tests.state(flaky) is not None and tests.state(healthy) is not None)
        assert tests.state(flaky).verdict == "failed"  # type: ignore[union-attr]
        assert tests.state(healthy).verdict == "passed"  # type: ignore[union-attr]
        dns.clear()  # the list comes back to life
        healthy_list(dns, "flaky.test")
        await _until(lambda: tests.state(flaky).verdict == "passed")  # type: ignore[union-attr]
    finally:
        await tests.close()
    await asyncio.sleep(0.2)  # a probe sent just before close may still be on its way to the server
    queries = dns.count()
    await asyncio.sleep(0.3)
    assert dns.count() == queries  # closed: no more tests


async def test_concurrent_verifications_share_one_test(dns: DnsServer, resolver: Resolver) -> None:
    healthy_list(dns, "healthy.test")
    dns.delay = 0.05
    (healthy,) = build_zones(["healthy.test"])
    tests = SelfTests([healthy], resolver=resolver, timeout=0.5)
    outcomes = await asyncio.gather(*(tests.verify(healthy) for _ in range(10)))
    assert {o.verdict for o in outcomes} == {"passed"}
    assert dns.count() == 2  # one probe for 127.0.0.2, one for 127.0.0.1
    await tests.verify(healthy)  # conclusive: answered without asking again
    assert dns.count() == 2
    await tests.close()


async def test_an_inconclusive_zone_is_not_retested_on_every_request(dns: DnsServer) -> None:
    dns.servfail("broken.test")
    async with Resolver(dns.servers, timeout=0.2) as resolver:
        (broken,) = build_zones(["broken.test"])
        tests = SelfTests([broken], resolver=resolver, timeout=0.2, retry=60)
        assert (await tests.verify(broken)).verdict == "inconclusive"
        asked = dns.count()
        assert asked >= 2
        assert (await tests.verify(broken)).verdict == "inconclusive"
        assert dns.count() == asked  # the second verification reused the first
        assert tests.state(broken) is None  # still untested
        await tests.close()


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:  # a bound on a hang
    ends = time.perf_counter() + timeout
    while not condition():
        assert time.perf_counter() < ends, "condition not reached in time"
        await asyncio.sleep(0.01)


# The whole check ------------------------------------------------------------------------------------


async def _check(
    ip: str,
    zones: list[str],
    resolver: Resolver,
    *,
    deadline: float = 1.0,
    dns_timeout: float = 0.3,
    tested: bool = True,
    reputation: blacklist.Reputation | None = None,
) -> dict:
    built = build_zones(zones)
    tests = SelfTests(built, resolver=resolver, timeout=dns_timeout, retry=60)
    try:
        if tested:
            await tests.run_once()
        return await blacklist.check(
            ipaddress.IPv4Address(ip),
            zones=built,
            resolver=resolver,
            tests=tests,
            reputation=reputation,
            reputation_name="reputation.test",
            deadline=deadline,
            dns_timeout=dns_timeout,
        )
    finally:
        await tests.close()


def _by_name(result: dict) -> dict[str, dict]:
    return {source["name"]: source for source in result["sources"]}


async def test_real_failure_modes_side_by_side(dns: DnsServer) -> None:
    healthy_list(dns, "healthy.test", listed={LISTED_IP: "127.0.0.2"})
    answers_everything(dns, "zen.spamhaus.org", "127.255.255.254")
    rewrites_nxdomain(dns, "rewrite.test")
    answers_everything(dns, "dead.test", "127.0.0.2")
    dns.blackhole("silent.test")
    dns.servfail("broken.test")
    dns.refuse("refused.test")
    zones = [
        "healthy.test",
        "zen.spamhaus.org",
        "rewrite.test",
        "dead.test",
        "silent.test",
        "broken.test",
        "refused.test",
    ]
    async with Resolver(dns.servers, timeout=0.3) as resolver:
        result = await _check(CLEAN_IP, zones, resolver, deadline=1.0, dns_timeout=0.3)
    sources = _by_name(result)
    assert [s["name"] for s in result["sources"]] == zones
    assert sources["healthy.test"] == {"name": "healthy.test", "status": "clear", "listed": False}
    for name in zones[1:]:
        assert sources[name]["status"] == "unavailable", name
        assert sources[name]["listed"] is None
    assert "public or open resolver" in sources["zen.spamhaus.org"]["detail"]
    assert "self-test" in sources["rewrite.test"]["detail"] and "rewrites NXDOMAIN" in sources["rewrite.test"]["detail"]
    assert "self-test" in sources["dead.test"]["detail"] and "lists everything" in sources["dead.test"]["detail"]
    assert "no answer within" in sources["silent.test"]["detail"]
    assert "SERVFAIL" in sources["broken.test"]["detail"]
    assert "REFUSED" in sources["refused.test"]["detail"]
    assert result["status"] == "unknown" and result["listed"] is False


async def test_a_listing_wins_over_unavailable_sources(dns: DnsServer) -> None:
    healthy_list(dns, "healthy.test", listed={LISTED_IP: "127.0.0.2"})
    dns.servfail("broken.test")
    async with Resolver(dns.servers, timeout=0.3) as resolver:
        result = await _check(LISTED_IP, ["healthy.test", "broken.test"], resolver)
    assert result["status"] == "listed" and result["listed"] is True
    assert _by_name(result)["healthy.test"]["status"] == "listed"


async def test_clear_only_when_every_source_answered(dns: DnsServer) -> None:
    healthy_list(dns, "one.test")
    healthy_list(dns, "two.test")
    async with Resolver(dns.servers, timeout=0.3) as resolver:
        result = await _check(CLEAN_IP, ["one.test", "two.test"], resolver)
        assert result == {
            "ip": CLEAN_IP,
            "status": "clear",
            "listed": False,
            "sources": [
                {"name": "one.test", "status": "clear", "listed": False},
                {"name": "two.test", "status": "clear", "listed": False},
            ],
        }

        async def reputation_down(ip: ipaddress.IPv4Address, timeout: float) -> SourceResult:
            return SourceResult("reputation.test", "unavailable", "HTTP 503")

        result = await _check(CLEAN_IP, ["one.test", "two.test"], resolver, reputation=reputation_down)
        assert result["status"] == "unknown"


async def test_an_untested_zone_is_verified_in_the_same_round_trip(dns: DnsServer) -> None:
    healthy_list(dns, "healthy.test", listed={LISTED_IP: "127.0.0.2"})
    answers_everything(dns, "dead.test", "127.0.0.2")
    dns.delay = 0.2  # under c-ares's 250 ms first try; the timeouts far above it
    async with Resolver(dns.servers, timeout=2.0) as resolver:
        started = time.perf_counter()
        result = await _check(LISTED_IP, ["healthy.test", "dead.test"], resolver, tested=False, dns_timeout=2.0)
        elapsed = time.perf_counter() - started
    sources = _by_name(result)
    assert sources["healthy.test"]["status"] == "listed"
    # The dead list answered 127.0.0.2, a valid code, but its self-test showed it lists everything.
    assert sources["dead.test"]["status"] == "unavailable"
    assert "self-test" in sources["dead.test"]["detail"]
    # The query and both probes ran concurrently: one after another they take at least 3 x 0.2 s.
    assert elapsed < 0.2 * 3


async def test_an_unverifiable_answer_is_not_trusted(dns: DnsServer) -> None:
    """The zone answers the question but its self-test probes get SERVFAIL: no clear."""
    dns.servfail(query_name("127.0.0.2", "odd.test"))
    dns.servfail(query_name("127.0.0.1", "odd.test"))
    async with Resolver(dns.servers, timeout=0.3) as resolver:
        result = await _check(CLEAN_IP, ["odd.test"], resolver, tested=False)
    (source,) = result["sources"]
    assert source["status"] == "unavailable"
    assert "not yet verified" in source["detail"]
    assert result["status"] == "unknown"


async def test_slow_sources_do_not_hold_the_answer_past_the_deadline(dns: DnsServer) -> None:
    healthy_list(dns, "healthy.test")
    healthy_list(dns, "slow.test")
    dns.slow(query_name(CLEAN_IP, "slow.test"), 5.0)
    dns.blackhole("silent.test")
    deadline = 0.4

    async def slow_reputation(ip: ipaddress.IPv4Address, timeout: float) -> SourceResult:
        await asyncio.sleep(10)
        return SourceResult("reputation.test", "clear")

    async with Resolver(dns.servers, timeout=5.0) as resolver:
        built = build_zones(["healthy.test", "slow.test", "silent.test"])
        tests = SelfTests(built[:2], resolver=resolver, timeout=1.0)
        await tests.run_once()
        started = time.perf_counter()
        result = await blacklist.check(
            ipaddress.IPv4Address(CLEAN_IP),
            zones=built,
            resolver=resolver,
            tests=tests,
            reputation=slow_reputation,
            reputation_name="reputation.test",
            deadline=deadline,
            dns_timeout=5.0,  # longer than the deadline: the deadline must win
        )
        elapsed = time.perf_counter() - started
        await tests.close()
    assert elapsed < 5.0, elapsed  # before the 5 s sources and timeouts (or the 10 s reputation): the deadline
    sources = _by_name(result)
    assert sources["healthy.test"]["status"] == "clear"
    for name in ("slow.test", "silent.test", "reputation.test"):
        assert sources[name]["status"] == "unavailable", name
        assert "0.4 s" in sources[name]["detail"]
    assert result["status"] == "unknown"


async def test_zones_are_queried_concurrently(dns: DnsServer) -> None:
    zones = [f"list{i}.test" for i in range(6)]
    for name in zones:
        healthy_list(dns, name)
    async with Resolver(dns.servers, timeout=1.0) as resolver:
        built = build_zones(zones)
        tests = SelfTests(built, resolver=resolver, timeout=1.0)
        await tests.run_once()
        dns.delay = 0.2  # under c-ares's 250 ms first try
        started = time.perf_counter()
        result = await blacklist.check(
            ipaddress.IPv4Address(CLEAN_IP),
            zones=built,
            resolver=resolver,
            tests=tests,
            reputation=None,
            deadline=2.0,
            dns_timeout=1.0,
        )
        elapsed = time.perf_counter() - started
        await tests.close()
    assert result["status"] == "clear"
    assert elapsed < 6 * 0.2 / 2  # about 0.2 s; half the sequential sum of 1.2 s


async def test_a_crashing_source_is_unavailable_not_a_500(dns: DnsServer, resolver: Resolver) -> None:
    healthy_list(dns, "healthy.test")

    async def broken(ip: ipaddress.IPv4Address, timeout: float) -> SourceResult:
        raise RuntimeError("bug")

    result = await _check(CLEAN_IP, ["healthy.test"], resolver, reputation=broken)
    assert _by_name(result)["reputation.test"]["status"] == "unavailable"
    assert result["status"] == "unknown"
