"""Rate limits (docs/API.md#rate-limits): bucket arithmetic, quotas, headers, client keys and memory bounds.

Time is a :class:`FakeClock` moved by hand: no test sleeps.
"""

from __future__ import annotations

import ipaddress
import tracemalloc
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ipintel.api.mcp.transport import RULES as MCP_RULES
from ipintel.app import ENDPOINTS
from ipintel.infra.limiter import UNKNOWN_CLIENT, RateLimiter, client_key, limiter_from_settings
from ipintel.settings import DEFAULT_RATE_LIMITS, Settings
from ipintel.web.gate import RateLimitGate, rate_limit_headers
from ipintel.web.middleware import RequestContextMiddleware
from tests.support.app import running_app
from tests.support.clock import FakeClock

LIMITS = dict(DEFAULT_RATE_LIMITS)  # general 60, dns 30, registry 10
RATE_HEADERS = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy")


def limiter(clock: FakeClock, **kwargs: Any) -> RateLimiter:
    return RateLimiter(LIMITS, clock=clock, **kwargs)


# Bucket arithmetic ------------------------------------------------------------------------


def test_a_full_bucket_allows_a_burst_of_the_limit_then_refuses() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    decisions = [rl.take("1.2.3.4", "registry") for _ in range(11)]
    assert [d.allowed for d in decisions] == [True] * 10 + [False]
    assert [d.remaining for d in decisions] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]
    # One token is earned every 6 s; the bucket is full again 6 s per token spent.
    assert [d.reset for d in decisions[:10]] == [6, 12, 18, 24, 30, 36, 42, 48, 54, 60]
    refused = decisions[10]
    assert refused.retry_after == 6 and refused.reset == 60 and refused.limit == 10
    assert rl.rejections["registry"] == 1


def test_refill_is_even_over_the_minute() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    clock.advance(5.9)
    early = rl.take("1.2.3.4", "registry")
    assert not early.allowed and early.retry_after == 1  # 0.1 s left, rounded up to whole seconds, at least 1
    clock.advance(0.1)
    on_time = rl.take("1.2.3.4", "registry")
    assert on_time.allowed and on_time.remaining == 0
    assert not rl.take("1.2.3.4", "registry").allowed
    clock.advance(30)  # five more tokens
    assert [rl.take("1.2.3.4", "registry").allowed for _ in range(6)] == [True] * 5 + [False]


def test_an_idle_minute_refills_the_whole_bucket_and_no_more() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    clock.advance(3600)  # an hour idle: still only 10 tokens
    assert [rl.take("1.2.3.4", "registry").allowed for _ in range(11)] == [True] * 10 + [False]


def test_refused_requests_spend_nothing() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    for _ in range(100):
        assert not rl.take("1.2.3.4", "registry").allowed
    clock.advance(6)
    assert rl.take("1.2.3.4", "registry").allowed


@pytest.mark.parametrize("limit", [1, 7, 60, 1000])
def test_retry_after_is_exactly_when_the_next_request_passes(limit: int) -> None:
    clock = FakeClock()
    rl = RateLimiter({"general": limit}, clock=clock)
    while rl.take("k", "general").allowed:
        pass
    wait = rl.take("k", "general").retry_after
    assert wait >= 1
    if wait > 1:  # a second earlier is still too early
        clock.advance(wait - 1)
        assert not rl.take("k", "general").allowed
        clock.advance(1)
    else:
        clock.advance(wait)
    assert rl.take("k", "general").allowed


def test_scopes_are_independent() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    assert not rl.take("1.2.3.4", "registry").allowed
    assert rl.take("1.2.3.4", "dns").allowed
    assert rl.take("1.2.3.4", "general").allowed
    assert rl.take("1.2.3.4", "general").remaining == 58


def test_clients_are_independent() -> None:
    rl = limiter(FakeClock())
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    assert rl.take("1.2.3.5", "registry").allowed


def test_decision_headers() -> None:
    rl = limiter(FakeClock())
    allowed = rl.take("1.2.3.4", "general")
    assert dict(rate_limit_headers(allowed)) == {
        b"ratelimit-limit": b"60",
        b"ratelimit-remaining": b"59",
        b"ratelimit-reset": b"1",
        b"ratelimit-policy": b"60;w=60",
    }
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    refused = rl.take("1.2.3.4", "registry")
    assert dict(rate_limit_headers(refused))[b"retry-after"] == b"6"
    assert dict(rate_limit_headers(refused))[b"ratelimit-policy"] == b"10;w=60"


def test_limits_off_means_no_limiter() -> None:
    assert limiter_from_settings(None, 10) is None
    assert limiter_from_settings({"general": 5}, 10) is not None


# Client keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "key"),
    [
        ("8.8.8.8", "8.8.8.8"),
        ("::ffff:8.8.8.8", "8.8.8.8"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        (None, UNKNOWN_CLIENT),
        ("garbage", UNKNOWN_CLIENT),
    ],
)
def test_client_key(ip: str | None, key: str) -> None:
    assert client_key(ip) == key
    if ip and ip != "garbage":
        assert client_key(ipaddress.ip_address(ip)) == key


# Memory bounds ---------------------------------------------------------------------------


def test_idle_buckets_expire() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for i in range(1000):
        rl.take(f"10.0.{i // 256}.{i % 256}", "general")
    assert rl.tracked("general") == 1000
    clock.advance(1)  # one general token refilled: every one of these buckets is full again
    for _ in range(200):  # requests from one busy client sweep the idle ones as they go, four per request
        rl.take("8.8.8.8", "general")
        clock.advance(0.001)
    assert rl.tracked("general") == 1000 - 200 * 4 + 1
    assert rl.sweep() == 200  # the rest at once; the busy client's bucket is not full and stays
    assert rl.tracked("general") == 1


def test_a_bucket_that_is_not_full_is_kept() -> None:
    clock = FakeClock()
    rl = limiter(clock)
    for _ in range(10):
        rl.take("1.2.3.4", "registry")
    clock.advance(59)  # 9.83 tokens earned back: not full yet
    assert rl.sweep() == 0
    assert rl.take("1.2.3.4", "registry").remaining == 8


def test_hundred_thousand_distinct_clients_stay_within_the_cap() -> None:
    clock = FakeClock()
    rl = limiter(clock, max_clients=10_000)
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):
            # The keys client_key() makes for 11.0.0.0 + i and for 2001:db8:<i>::1 (checked below).
            rl.take(f"11.{i >> 16}.{(i >> 8) & 255}.{i & 255}", "general")
            rl.take(f"2001:db8:{i >> 16:x}:{i & 0xFFFF:x}::/64", "dns")
        used = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert rl.tracked("general") == 10_000 and rl.tracked("dns") == 10_000
    assert client_key(ipaddress.IPv4Address(0x0B000000 + 99_999)) == "11.1.134.159"
    assert client_key(ipaddress.IPv6Address((0x2001_0DB8 << 96) + (99_999 << 64) + 1)) == "2001:db8:1:869f::/64"
    assert rl.take("11.1.134.159", "general").remaining == 58  # the most recent clients are still tracked
    assert rl.stats()["general"]["evictions"] == 90_000
    # 20,000 buckets of a short key and one float each: a few MiB at most,
    # where 200,000 unbounded ones would take ten times as much.
    assert used < 6 * 1024 * 1024, used


def test_eviction_drops_the_least_recently_used() -> None:
    rl = limiter(FakeClock(), max_clients=3)
    for key in ("a", "b", "c"):
        rl.take(key, "registry")
    rl.take("a", "registry")  # a is now the most recent
    rl.take("d", "registry")  # evicts b
    for _ in range(8):
        rl.take("a", "registry")
    assert not rl.take("a", "registry").allowed  # a kept its spent bucket
    assert rl.take("b", "registry").remaining == 9  # b was forgotten: a fresh bucket


def test_stats_per_scope() -> None:
    rl = limiter(FakeClock())
    for _ in range(12):
        rl.take("1.2.3.4", "registry")
    assert rl.stats()["registry"] == {"limit": 10, "rejections": 2, "tracked": 1, "evictions": 0}
    assert rl.stats()["dns"]["rejections"] == 0


# Through the app ----------------------------------------------------------------------------


def limited(settings: Settings, **limits: int) -> Settings:
    return settings.replace(rate_limits={**LIMITS, **limits})


def assert_rate_headers(response: httpx.Response, limit: int) -> None:
    for name in RATE_HEADERS:
        assert name in response.headers, (response.request.url, name)
    assert response.headers["ratelimit-limit"] == str(limit)
    assert response.headers["ratelimit-policy"] == f"{limit};w=60"
    assert int(response.headers["ratelimit-remaining"]) >= 0
    assert int(response.headers["ratelimit-reset"]) >= 0


async def test_headers_on_every_limited_route_success_or_error(settings: Settings) -> None:
    async with running_app(limited(settings), client=("8.8.8.8", 1), clock=FakeClock()) as client:
        responses = [
            await client.get("/ip/8.8.8.8"),
            await client.get("/ip"),
            await client.get("/ip/10.0.0.1"),  # 422
            await client.get("/ip/not-an-ip"),  # 400
            await client.get("/cidr", params={"range": "10.0.0.0/8"}),
            await client.get("/cidr", params={"range": "nonsense"}),  # 400
        ]
        for path, scope in _extra_limited_paths():
            response = await client.get(path)  # upstreams are closed ports here: 502/504, still limited
            assert_rate_headers(response, LIMITS[scope])
    assert [r.status_code for r in responses] == [200, 200, 422, 400, 200, 400]
    for response in responses:
        assert_rate_headers(response, 60)
    assert [r.headers["ratelimit-remaining"] for r in responses] == ["59", "58", "57", "56", "55", "54"]


def _extra_limited_paths() -> list[tuple[str, str]]:
    """Limited routes of capabilities that have landed: the DNS, RDAP and blacklist ones."""
    samples = {
        "/dns/{domain}": "/dns/example.com",
        "/dns/{ip}/reverse": "/dns/8.8.8.8/reverse",
        "/whois/{ip}": "/whois/8.8.8.8",
        "/asn/{asn}": "/asn/AS15169",
        "/blacklist/{ip}": "/blacklist/8.8.8.8",
        "/ip/{ip}/vpn": "/ip/8.8.8.8/vpn",
    }
    return [(samples[ep.path], ep.quota) for ep in ENDPOINTS if ep.path in samples and ep.quota]


async def test_unlimited_routes_carry_no_rate_headers(settings: Settings) -> None:
    async with running_app(limited(settings, general=1), clock=FakeClock()) as client:
        await client.get("/ip/8.8.8.8")
        assert (await client.get("/ip/8.8.8.8")).status_code == 429
        for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/no/such/route", "/ip/8.8.8.8/nope/x"):
            response = await client.get(path)
            assert response.status_code != 429, path
            assert "ratelimit-limit" not in response.headers, path


async def test_exhausted_scope_answers_429_with_retry_after_then_recovers(settings: Settings) -> None:
    clock = FakeClock()
    async with running_app(limited(settings, general=10), clock=clock) as client:
        for i in range(10):
            ok = await client.get("/ip/8.8.8.8")
            assert ok.status_code == 200 and ok.headers["ratelimit-remaining"] == str(9 - i)
        refused = await client.get("/ip/8.8.8.8")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.headers["retry-after"] == "6"
        assert_rate_headers(refused, 10)
        assert refused.headers["ratelimit-remaining"] == "0"
        assert refused.headers.get("x-request-id")
        clock.advance(5)
        assert (await client.get("/ip/8.8.8.8")).headers["retry-after"] == "1"
        clock.advance(1)
        assert (await client.get("/ip/8.8.8.8")).status_code == 200
        limiter = client.app.state.limiter
        assert limiter.rejections["general"] == 2


async def test_ipv6_clients_in_one_slash_64_share_a_bucket(settings: Settings) -> None:
    async with running_app(limited(settings, general=2), client=("2001:4860:1:2::1", 1), clock=FakeClock()) as first:
        app = first.app

        def peer(address: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app, client=(address, 1)), base_url="http://localhost"
            )

        assert (await first.get("/ip/8.8.8.8")).status_code == 200
        async with peer("2001:4860:1:2:ffff:eeee:dddd:cccc") as neighbour, peer("2001:4860:1:3::1") as other:
            assert (await neighbour.get("/ip/8.8.8.8")).status_code == 200
            assert (await neighbour.get("/ip/8.8.8.8")).status_code == 429
            assert (await first.get("/ip/8.8.8.8")).status_code == 429
            assert (await other.get("/ip/8.8.8.8")).status_code == 200  # the next /64


async def test_a_spoofed_forwarded_for_does_not_dodge_the_limit(settings: Settings) -> None:
    trusting = limited(settings, general=1).replace(trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),))
    async with running_app(trusting, client=("8.8.8.8", 1), clock=FakeClock()) as client:
        assert (await client.get("/ip/8.8.8.8")).status_code == 200
        spoofed = await client.get("/ip/8.8.8.8", headers={"X-Forwarded-For": "1.2.3.4"})
    assert spoofed.status_code == 429


async def test_a_trusted_proxy_gets_one_bucket_per_client(settings: Settings) -> None:
    trusting = limited(settings, general=1).replace(trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),))
    async with running_app(trusting, client=("10.0.0.1", 1), clock=FakeClock()) as client:
        first = await client.get("/ip/8.8.8.8", headers={"X-Forwarded-For": "1.2.3.4"})
        second = await client.get("/ip/8.8.8.8", headers={"X-Forwarded-For": "1.2.3.5"})
        again = await client.get("/ip/8.8.8.8", headers={"X-Forwarded-For": "6.6.6.6, 1.2.3.4"})
    assert (first.status_code, second.status_code, again.status_code) == (200, 200, 429)


async def test_mcp_rate_limit_answer_is_json_rpc(settings: Settings) -> None:
    async with running_app(limited(settings, general=1), clock=FakeClock()) as client:
        await client.get("/ip/8.8.8.8")
        for path in ("/mcp", "/mcp/"):
            response = await client.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status_code == 429
            assert response.headers["content-type"] == "application/json"
            assert response.headers["retry-after"] == "60"
            body = response.json()
            assert body["jsonrpc"] == "2.0" and body["id"] is None
            assert body["error"]["code"] == -32000
            assert "rate limit" in body["error"]["message"]


async def test_limits_off_no_headers_and_caller_still_resolved(settings: Settings) -> None:
    assert settings.rate_limits is None
    async with running_app(settings, client=("8.8.8.8", 1)) as client:
        assert client.app.state.limiter is None
        responses = [await client.get("/ip") for _ in range(100)]
    assert all(r.status_code == 200 and r.json()["data"]["ip"] == "8.8.8.8" for r in responses)
    assert all("ratelimit-limit" not in r.headers for r in responses)


async def test_cors_preflight_is_not_counted(settings: Settings) -> None:
    async with running_app(limited(settings, general=1), clock=FakeClock()) as client:
        for _ in range(3):
            assert (await client.options("/mcp")).status_code != 429
        assert (await client.get("/ip/8.8.8.8")).status_code == 200


async def test_registry_scope_eleventh_request_is_refused_then_recovers() -> None:
    """The registry quota on the request middleware alone, over an app whose handler
    answers like the real /whois does without an upstream (502)."""
    clock = FakeClock()
    rl = RateLimiter(LIMITS, clock=clock)

    async def whois(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"code": "upstream_error", "message": "no registry"}}, status_code=502)

    app = Starlette(routes=[Route("/whois/{ip}", whois)])
    rules = [("/whois/{ip}", "registry"), ("/blacklist/{ip}", "registry"), *MCP_RULES]
    wrapped = RequestContextMiddleware(app, gate=RateLimitGate(limiter=rl, rules=rules))
    transport = httpx.ASGITransport(app=wrapped, client=("8.8.8.8", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        answers = [await client.get("/whois/1.1.1.1") for _ in range(11)]
        assert [a.status_code for a in answers] == [502] * 10 + [429]
        assert all(a.headers["ratelimit-policy"] == "10;w=60" for a in answers)
        assert answers[-1].headers["retry-after"] == "6"
        assert answers[-1].json()["error"]["code"] == "rate_limited"
        # /blacklist shares the registry bucket.
        assert (await client.get("/blacklist/1.1.1.1")).status_code == 429
        clock.advance(6)
        assert (await client.get("/whois/1.1.1.1")).status_code == 502


async def test_registry_scope_through_the_app_whois_and_blacklist_share_it(settings: Settings) -> None:
    """The real /whois and /blacklist routes: their upstreams are closed ports in the
    test settings, so they answer 502/504 (or an ``unknown`` verdict), and still spend tokens."""
    clock = FakeClock()
    configured = settings.replace(rate_limits=LIMITS, blacklist_deadline=0.3, dns_timeout=0.2)
    async with running_app(configured, clock=clock) as client:
        spent = [await client.get("/whois/8.8.8.8") for _ in range(6)]
        spent += [await client.get("/blacklist/8.8.8.8") for _ in range(4)]
        assert all(r.status_code != 429 for r in spent)
        assert [r.headers["ratelimit-remaining"] for r in spent] == [str(n) for n in range(9, -1, -1)]
        refused = await client.get("/whois/8.8.8.8")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "6"
        assert (await client.get("/blacklist/8.8.8.8")).status_code == 429
        assert (await client.get("/ip/8.8.8.8")).status_code == 200  # the general scope is untouched
        clock.advance(6)
        assert (await client.get("/whois/8.8.8.8")).status_code != 429
        assert client.app.state.limiter.stats()["registry"]["rejections"] == 2


def test_the_remembered_scopes_of_paths_are_bounded_and_right() -> None:
    """Request paths are the client's to choose: the memo of their quotas cannot grow without bound."""
    gate = RateLimitGate(limiter=None, rules=[*((ep.path, ep.quota) for ep in ENDPOINTS), *MCP_RULES])
    rules = gate.rules
    for i in range(10_000):
        assert rules.quota_of(f"/ip/{i}") == "general"
        assert rules.quota_of(f"/nowhere/{i}") is None
    assert len(rules._known) <= 4096
    assert rules.quota_of("/dns/example.com") == "dns"
    assert rules.quota_of("/whois/" + "1" * 300) == "registry"  # too long to remember, still matched
    assert "/whois/" + "1" * 300 not in rules._known


async def test_a_trailing_newline_is_limited_like_a_trailing_space(settings: Settings) -> None:
    """The gate and the router agree on paths ending in a newline (a route's ``$`` would
    match before it): a path the router serves is limited, one it does not is not."""
    gate = RateLimitGate(limiter=None, rules=[*((ep.path, ep.quota) for ep in ENDPOINTS), *MCP_RULES])
    for path in ("/cidr", "/ip/8.8.8.8/vpn", "/dns/8.8.8.8/reverse", "/ip/8.8.8.8", "/ip"):
        assert gate.rules.quota_of(path + "\n") == gate.rules.quota_of(path + " "), path
    async with running_app(limited(settings), client=("8.8.8.8", 1), clock=FakeClock()) as client:
        for path in ("/ip/8.8.8.8/vpn", "/dns/8.8.8.8/reverse", "/ip/8.8.8.8"):
            space, newline = [await client.get(path + end) for end in ("%20", "%0A")]
            assert newline.status_code == space.status_code, path
            assert ("ratelimit-limit" in newline.headers) == ("ratelimit-limit" in space.headers), path
