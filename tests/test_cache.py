"""The TTL caches and single flight (docs/API.md#caching), with a fake clock: no test sleeps.

Loaders here are small counting coroutines standing in for the far side of a
network call; the cache under test is the real one.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ipintel.errors import ApiError, UpstreamError, UpstreamTimeout
from ipintel.infra.cache import (
    BLACKLIST_TTL,
    DNS_MAX_TTL,
    GEOIP_TTL,
    NEGATIVE_TTL,
    Cache,
    blacklist_ttl,
    dns_ttl,
    negative_error_ttl,
    new_caches,
    stats,
)
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.clock import FakeClock


class Upstream:
    """Counts calls; answers ``value`` (or raises ``error``), optionally only once released."""

    def __init__(self, value: Any = "answer", error: BaseException | None = None, gated: bool = False) -> None:
        self.value = value
        self.error = error
        self.calls = 0
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()

    def loader(self) -> Callable[[], Awaitable[Any]]:
        async def load() -> Any:
            self.calls += 1
            await self.gate.wait()
            if self.error is not None:
                raise self.error
            return self.value

        return load


def make_cache(clock: FakeClock, max_entries: int = 100) -> Cache:
    return Cache("test", max_entries=max_entries, clock=clock)


# Lifetimes -----------------------------------------------------------------------------


async def test_value_is_served_until_its_lifetime_ends() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    upstream = Upstream()
    assert await cache.get_or_load("k", upstream.loader(), ttl=10) == "answer"
    assert await cache.get_or_load("k", upstream.loader(), ttl=10) == "answer"
    clock.advance(9.9)
    assert await cache.get_or_load("k", upstream.loader(), ttl=10) == "answer"
    assert upstream.calls == 1
    clock.advance(0.1)  # exactly at expiry: gone
    assert await cache.get_or_load("k", upstream.loader(), ttl=10) == "answer"
    assert upstream.calls == 2
    assert cache.stats()["hits"] == 2 and cache.stats()["misses"] == 2


async def test_lifetime_chosen_from_the_result() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    short, long_ = Upstream({"ttl": 5}), Upstream({"ttl": 50})
    ttl = lambda result: result["ttl"]  # noqa: E731
    await cache.get_or_load("short", short.loader(), ttl=ttl)
    await cache.get_or_load("long", long_.loader(), ttl=ttl)
    clock.advance(6)
    await cache.get_or_load("short", short.loader(), ttl=ttl)
    await cache.get_or_load("long", long_.loader(), ttl=ttl)
    assert (short.calls, long_.calls) == (2, 1)


@pytest.mark.parametrize("ttl", [None, 0, -1, lambda result: None, lambda result: 0])
async def test_no_lifetime_means_not_stored(ttl: Any) -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream()
    await cache.get_or_load("k", upstream.loader(), ttl=ttl)
    await cache.get_or_load("k", upstream.loader(), ttl=ttl)
    assert upstream.calls == 2
    assert len(cache) == 0


async def test_a_reader_that_never_stores_still_reads_what_others_stored() -> None:
    """The /ip rule: read the per-address entry, never create one."""
    cache = make_cache(FakeClock())
    upstream = Upstream()
    await cache.get_or_load("8.8.8.8", upstream.loader(), ttl=GEOIP_TTL)
    assert await cache.get_or_load("8.8.8.8", upstream.loader(), ttl=None) == "answer"
    assert upstream.calls == 1


# Errors ----------------------------------------------------------------------------


async def test_peek_answers_what_a_hit_would_without_awaiting_and_counts_only_when_taken() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    assert cache.peek("k") is None  # not there: the caller must load
    await cache.get_or_load("k", Upstream().loader(), ttl=10)
    take = cache.peek("k")
    assert take is not None and cache.stats()["hits"] == 0  # looking is not a hit
    assert take() == "answer" and cache.stats()["hits"] == 1
    clock.advance(10)
    assert cache.peek("k") is None  # expired: gone, as for get_or_load


async def test_peek_raises_a_cached_error_afresh_and_never_sees_a_load_under_way() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    failing = Upstream(error=ApiError("registration_not_found", "nobody holds it"))
    with pytest.raises(ApiError):
        await cache.get_or_load("gone", failing.loader(), ttl=60, error_ttl=negative_error_ttl)
    take = cache.peek("gone")
    assert take is not None
    with pytest.raises(ApiError) as caught:
        take()
    assert caught.value.code == "registration_not_found"
    gated = Upstream(gated=True)
    loading = asyncio.create_task(cache.get_or_load("slow", gated.loader(), ttl=60))
    await asyncio.sleep(0)
    assert cache.peek("slow") is None  # a load in flight is joined by get_or_load, not peeked
    gated.gate.set()
    assert await loading == "answer"


async def test_not_found_errors_are_cached_five_minutes_and_raised_again() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    upstream = Upstream(error=ApiError("domain_not_found", "no.such.example does not exist"))
    for _ in range(3):
        with pytest.raises(ApiError) as caught:
            await cache.get_or_load("no.such.example", upstream.loader(), ttl=60, error_ttl=negative_error_ttl)
        assert caught.value.code == "domain_not_found"
        assert caught.value.message == "no.such.example does not exist"
    assert upstream.calls == 1
    clock.advance(NEGATIVE_TTL)
    with pytest.raises(ApiError):
        await cache.get_or_load("no.such.example", upstream.loader(), ttl=60, error_ttl=negative_error_ttl)
    assert upstream.calls == 2


async def test_cached_error_is_a_fresh_exception_each_time() -> None:
    """Re-raising one stored instance would grow its traceback on every hit."""
    cache = make_cache(FakeClock())
    upstream = Upstream(error=ApiError("registration_not_found", "no registration"))
    raised = []
    for _ in range(3):
        with pytest.raises(ApiError) as caught:
            await cache.get_or_load("1.2.3.4", upstream.loader(), ttl=60, error_ttl=negative_error_ttl)
        raised.append(caught.value)
    assert len({id(e) for e in raised}) == 3
    assert all(e.code == "registration_not_found" for e in raised)


@pytest.mark.parametrize(
    "error", [UpstreamError("SERVFAIL"), UpstreamTimeout("too slow"), ApiError("address_not_found", "none")]
)
async def test_other_errors_are_not_cached(error: ApiError) -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream(error=error)
    for _ in range(2):
        with pytest.raises(ApiError) as caught:
            await cache.get_or_load("k", upstream.loader(), ttl=60, error_ttl=negative_error_ttl)
        assert caught.value.code == error.code
    assert upstream.calls == 2
    assert len(cache) == 0


async def test_a_bug_in_the_loader_propagates_and_is_not_cached() -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream(error=KeyError("oops"))
    for _ in range(2):
        with pytest.raises(KeyError):
            await cache.get_or_load("k", upstream.loader(), ttl=60, error_ttl=negative_error_ttl)
    assert upstream.calls == 2


# Single flight ---------------------------------------------------------------------


async def test_fifty_concurrent_callers_share_one_load() -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream({"records": []}, gated=True)
    callers = [asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60)) for _ in range(50)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert cache.stats()["loading"] == 1
    upstream.gate.set()
    results = await asyncio.gather(*callers)
    assert upstream.calls == 1
    assert all(r is results[0] for r in results)
    assert cache.stats() == {
        "hits": 0,
        "misses": 1,
        "coalesced": 49,
        "evictions": 0,
        "entries": 1,
        "max_entries": 100,
        "loading": 0,
    }


async def test_a_failure_reaches_every_waiter_and_is_not_cached() -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream(error=UpstreamTimeout("registry did not answer"), gated=True)
    callers = [
        asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60, error_ttl=negative_error_ttl))
        for _ in range(50)
    ]
    await asyncio.sleep(0)
    upstream.gate.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert upstream.calls == 1
    assert all(isinstance(o, UpstreamTimeout) for o in outcomes)
    assert len(cache) == 0 and cache.stats()["loading"] == 0
    upstream.error = None
    assert await cache.get_or_load("k", upstream.loader(), ttl=60) == "answer"
    assert upstream.calls == 2


async def test_a_cancelled_waiter_does_not_cancel_the_load_of_the_others() -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream(gated=True)
    impatient = asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60))
    patient = asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60))
    await asyncio.sleep(0)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    upstream.gate.set()
    assert await patient == "answer"
    assert upstream.calls == 1


async def test_a_load_whose_callers_all_left_still_completes_and_is_cached() -> None:
    cache = make_cache(FakeClock())
    upstream = Upstream(gated=True)
    caller = asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60))
    await asyncio.sleep(0)
    caller.cancel()
    upstream.gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert "k" in cache and cache.stats()["loading"] == 0
    assert await cache.get_or_load("k", upstream.loader(), ttl=60) == "answer"
    assert upstream.calls == 1


async def test_an_abandoned_failure_is_not_reported_as_never_retrieved() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        cache = make_cache(FakeClock())
        upstream = Upstream(error=UpstreamError("boom"), gated=True)
        caller = asyncio.create_task(cache.get_or_load("k", upstream.loader(), ttl=60))
        await asyncio.sleep(0)
        caller.cancel()
        upstream.gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert reported == []


# Bounds ------------------------------------------------------------------------------


async def test_entries_are_bounded_and_the_least_recently_used_goes_first() -> None:
    cache = make_cache(FakeClock(), max_entries=100)
    keep = Upstream("kept")
    await cache.get_or_load("keep", keep.loader(), ttl=3600)
    for i in range(1000):
        await cache.get_or_load(i, Upstream(i).loader(), ttl=3600)
        await cache.get_or_load("keep", keep.loader(), ttl=3600)  # recently used: survives
        assert len(cache) <= 100
    assert keep.calls == 1
    assert cache.stats()["evictions"] == 1000 - 99
    assert cache.stats()["entries"] == 100


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 40)), max_size=40))
def test_loads_match_a_model_of_expiry(steps: list[tuple[int, float]]) -> None:
    """Whatever the order of requests and clock moves, a key is loaded again
    exactly when its previous answer is at least ``ttl`` seconds old."""

    async def run() -> None:
        clock = FakeClock()
        cache = make_cache(clock)
        upstream = Upstream()
        loaded_at: dict[int, float] = {}
        expected = 0
        for key, wait in steps:
            clock.advance(wait)
            if key not in loaded_at or clock() >= loaded_at[key] + 30:
                loaded_at[key] = clock()
                expected += 1
            await cache.get_or_load(key, upstream.loader(), ttl=30)
        assert upstream.calls == expected

    asyncio.run(run())


# Lifetime policies of docs/API.md#caching ---------------------------------------------


def _record(ttl: int) -> dict[str, Any]:
    return {"name": "example.com", "type": "A", "ttl": ttl, "data": "93.184.215.14"}


@pytest.mark.parametrize(
    ("ttls", "expected"),
    [
        ([30], 30),
        ([3600], DNS_MAX_TTL),
        ([600, 45, 120], 45),
        ([0], None),  # TTL 0: do not cache
        ([300, 0], None),
        ([], DNS_MAX_TTL),  # no record of that type: kept like NXDOMAIN
    ],
)
def test_dns_lifetime_is_capped_by_the_smallest_record_ttl(ttls: list[int], expected: float | None) -> None:
    assert dns_ttl({"records": [_record(t) for t in ttls]}) == expected


def test_large_dns_answers_are_not_kept() -> None:
    """The DNS cache is bounded in entries; with 64 KB TXT answers under many names it
    would not be bounded in bytes, so answers over DNS_MAX_CACHED_BYTES are not kept."""
    big = [{"name": "big.example", "type": "TXT", "ttl": 300, "data": "x" * 255} for _ in range(17)]
    assert dns_ttl({"records": big}) is None
    assert dns_ttl({"records": big[:15]}) == 300


async def test_dns_answer_expires_with_its_record_ttl() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    upstream = Upstream({"records": [_record(20)]})
    await cache.get_or_load(("example.com", "A"), upstream.loader(), ttl=dns_ttl)
    clock.advance(19)
    await cache.get_or_load(("example.com", "A"), upstream.loader(), ttl=dns_ttl)
    assert upstream.calls == 1
    clock.advance(1)
    await cache.get_or_load(("example.com", "A"), upstream.loader(), ttl=dns_ttl)
    assert upstream.calls == 2


def _verdict(*statuses: str) -> dict[str, Any]:
    listed = {"listed": True, "clear": False, "unavailable": None}
    sources = [{"name": f"zone{i}", "status": s, "listed": listed[s]} for i, s in enumerate(statuses)]
    if "listed" in statuses:
        status = "listed"
    elif "unavailable" in statuses:
        status = "unknown"
    else:
        status = "clear"
    return {"ip": "192.0.2.1", "status": status, "listed": status == "listed", "sources": sources}


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (("clear", "clear"), BLACKLIST_TTL),
        (("listed", "clear"), BLACKLIST_TTL),
        (("clear", "unavailable"), None),
        (("listed", "unavailable"), None),  # listed, but not every source answered
    ],
)
def test_blacklist_verdict_is_cached_only_when_definitive(statuses: tuple[str, ...], expected: float | None) -> None:
    assert blacklist_ttl(_verdict(*statuses)) == expected


async def test_unavailable_blacklist_verdict_is_asked_again() -> None:
    clock = FakeClock()
    cache = make_cache(clock)
    unknown = Upstream(_verdict("clear", "unavailable"))
    for _ in range(3):
        await cache.get_or_load("192.0.2.1", unknown.loader(), ttl=blacklist_ttl)
    assert unknown.calls == 3
    definitive = Upstream(_verdict("clear", "clear"))
    for _ in range(3):
        await cache.get_or_load("192.0.2.2", definitive.loader(), ttl=blacklist_ttl)
    clock.advance(BLACKLIST_TTL - 1)
    await cache.get_or_load("192.0.2.2", definitive.loader(), ttl=blacklist_ttl)
    assert definitive.calls == 1


def test_new_caches_and_their_stats() -> None:
    caches = new_caches(123)
    assert set(caches) == {"geoip", "whois", "blacklist", "dns"}
    figures = stats(caches)
    assert figures["whois"]["max_entries"] == 123
    assert figures["dns"]["hits"] == 0


# Through the service: REST and the Intel methods share the caches -----------------------


async def test_ip_records_live_24_hours(settings: Settings) -> None:
    clock = FakeClock()
    async with running_app(settings, clock=clock) as client:
        geoip = client.app.state.intel.caches["geoip"]
        first = await client.get("/ip/8.8.8.8")
        await client.get("/ip/8.8.8.8")
        clock.advance(GEOIP_TTL - 1)
        await client.get("/ip/8.8.8.8")
        assert geoip.stats()["misses"] == 1 and geoip.stats()["hits"] == 2
        clock.advance(1)
        last = await client.get("/ip/8.8.8.8")
        assert geoip.stats()["misses"] == 2
    assert first.json() == last.json()


async def test_canonical_forms_share_one_entry(settings: Settings) -> None:
    async with running_app(settings, clock=FakeClock()) as client:
        geoip = client.app.state.intel.caches["geoip"]
        for text in ("8.8.8.8", "::ffff:8.8.8.8", "2001:4860::1", "2001:4860:0:0::1"):
            assert (await client.get(f"/ip/{text}")).status_code == 200
        assert geoip.stats()["misses"] == 2 and geoip.stats()["hits"] == 2


async def test_own_address_lookup_reads_but_never_fills_the_cache(settings: Settings) -> None:
    async with running_app(settings, client=("8.8.4.4", 4000), clock=FakeClock()) as client:
        intel = client.app.state.intel
        geoip = intel.caches["geoip"]
        assert (await client.get("/ip")).json()["data"]["ip"] == "8.8.4.4"
        assert len(geoip) == 0
        await client.get("/ip/8.8.4.4")
        assert len(geoip) == 1
        await client.get("/ip")
        assert geoip.stats()["hits"] == 1
        # The Intel method MCP's lookup_ip uses shares the same entry.
        assert (await intel.lookup_ip("8.8.4.4"))["ip"] == "8.8.4.4"
        assert geoip.stats()["hits"] == 2


async def test_errors_of_geoip_lookups_are_not_cached(settings: Settings) -> None:
    async with running_app(settings, clock=FakeClock()) as client:
        geoip = client.app.state.intel.caches["geoip"]
        for _ in range(2):
            assert (await client.get("/ip/9.9.9.9")).json()["error"]["code"] == "address_not_found"
            assert (await client.get("/ip/10.0.0.1")).json()["error"]["code"] == "reserved_address"
        assert len(geoip) == 0 and geoip.stats()["misses"] == 2
