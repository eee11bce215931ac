"""Shared state on Redis (``IPINTEL_REDIS_URL``; ipintel/infra/shared.py, docs/API.md#caching, #rate-limits).

Against a real ``redis-server`` started by the suite on 127.0.0.1 (tests/support/redis.py; skipped with the
install command when missing, failed under CI=true): the apps of one test share it as separate processes
would, and the fleet tests run three real server processes on it. Redis is killed, frozen and restarted
on command: no request may fail because of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ipintel.capabilities.asn import AsnInfo
from ipintel.capabilities.cymru import CymruAsnSource, origin_name
from ipintel.infra.limiter import Quota, RateLimiter
from ipintel.infra.resolver import Resolver
from ipintel.infra.shared import SharedRateLimiter, SharedStore
from ipintel.service import Intel
from ipintel.settings import ConfigError, Settings
from tests.support.app import free_port, running_app, server_process, wait_for
from tests.support.dns_server import DnsServer
from tests.support.fake_internet import ARIN_IP, RIPE_IP, FakeInternet
from tests.support.mcp import call_tool, error_of
from tests.support.rdap_server import RdapServer, Reply, rdap_fixture
from tests.support.redis import RedisServer, require_redis

RATE_HEADERS = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    require_redis()
    with RedisServer() as server:
        yield server


def shared(settings: Settings, redis: RedisServer, **changes: object) -> Settings:
    return settings.replace(redis_url=redis.url, **changes)


@contextlib.asynccontextmanager
async def two_apps(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two apps (each its own Intel, caches and buckets, as two processes) on one Redis, one client address."""
    async with running_app(settings) as a, running_app(settings) as b:
        yield a, b


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


# Rate limits -----------------------------------------------------------------------------------------


async def test_one_bucket_for_all_processes_with_the_same_headers(settings: Settings, redis: RedisServer) -> None:
    limited = shared(settings, redis, rate_limits={Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10})
    async with two_apps(limited) as (a, b):
        answers = [await (a if i % 2 else b).get("/whois/3.3.3.3") for i in range(11)]  # 502: the RDAP port is closed
        assert [r.status_code != 429 for r in answers] == [True] * 10 + [False]
        assert [int(r.headers["ratelimit-remaining"]) for r in answers] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]
        assert [int(r.headers["ratelimit-reset"]) for r in answers[:10]] == [6, 12, 18, 24, 30, 36, 42, 48, 54, 60]
        refused = answers[10]
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.headers["retry-after"] == "6" and refused.headers["ratelimit-policy"] == "10;w=60"
        assert all(name in r.headers for r in answers for name in RATE_HEADERS)
        # The bucket is one key, expiring when it is full again (60 s): Redis needs no cleanup.
        assert redis.keys() == ["ipintel:v1:rl:registry:203.0.113.7"]
        pttl = int(redis.command("PTTL", "ipintel:v1:rl:registry:203.0.113.7").decode().strip(":\r\n"))
        assert 55_000 < pttl <= 60_000
        # The refusals are counted where /metrics reads them.
        assert (
            metric((await a.get("/metrics")).text, "ipintel_rate_limit_rejections_total")
            + metric((await b.get("/metrics")).text, "ipintel_rate_limit_rejections_total")
            == 1
        )
        # Other quotas and clients are other buckets.
        assert (await a.get("/cidr?range=10.0.0.0/8")).headers["ratelimit-remaining"] == "59"


async def test_tool_calls_and_profile_parts_spend_in_redis_too(settings: Settings, redis: RedisServer) -> None:
    limited = shared(settings, redis, rate_limits={Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 2})
    async with two_apps(limited) as (a, b):
        first = (await a.get("/ip/3.3.3.3/profile?include=whois")).json()["data"]["whois"]
        assert first["error"]["code"] != "rate_limited"  # the registry is unreachable here: 502, but spent
        second = await call_tool(b, "whois_ip", {"ip": "3.3.3.3"})
        assert error_of(second)["code"] != "rate_limited"
        third = (await b.get("/ip/3.3.3.3/profile?include=whois")).json()["data"]["whois"]
        assert third["error"]["code"] == "rate_limited"
        assert error_of(await call_tool(a, "whois_ip", {"ip": "3.3.3.3"}))["code"] == "rate_limited"


async def test_redis_arithmetic_is_the_in_process_arithmetic(redis: RedisServer) -> None:
    """Same limits, same sequence of requests at once: the same decisions (times rounded to seconds)."""
    store = SharedStore(redis.url)
    await store.start()
    try:
        for limit in (1, 7, 60):  # slow enough that the time the calls take earns no token
            remote = SharedRateLimiter(RateLimiter({Quota.GENERAL: limit}), store)
            local = RateLimiter({Quota.GENERAL: limit})
            for _ in range(limit + 2):
                mine, theirs = local.take(f"k{limit}", Quota.GENERAL), await remote.take(f"k{limit}", Quota.GENERAL)
                assert (mine.allowed, mine.remaining, mine.retry_after) == (
                    theirs.allowed,
                    theirs.remaining,
                    theirs.retry_after,
                )
                assert abs(mine.reset - theirs.reset) <= 1
            assert store.up and not store.failures
    finally:
        await store.close()


# Caches ----------------------------------------------------------------------------------------------


async def test_a_registry_is_asked_once_whichever_process_asks(
    whois_settings: Settings, rdap: RdapServer, redis: RedisServer
) -> None:
    path = rdap.ip_path("arin", "3.3.3.3")
    rdap.set(path, Reply.json(rdap_fixture("arin_3_0_0_0")))
    async with two_apps(shared(whois_settings, redis)) as (a, b):
        assert (await a.get("/whois/3.3.3.3")).status_code == 200
        answer = await b.get("/whois/3.3.3.3")
        assert answer.status_code == 200 and answer.json() == (await a.get("/whois/3.3.3.3")).json()
        assert rdap.hits[path] == 1
        # Kept in Redis for the lifetime of docs/API.md#caching: 7 days.
        pttl = int(redis.command("PTTL", "ipintel:v1:whois:3.3.3.3").decode().strip(":\r\n"))
        assert 7 * 86400_000 - 60_000 < pttl <= 7 * 86400_000
        assert metric((await b.get("/metrics")).text, "ipintel_cache_shared_hits_total") == 1


async def test_not_found_is_shared_for_five_minutes_and_failures_are_not_shared(
    whois_settings: Settings, rdap: RdapServer, redis: RedisServer
) -> None:
    missing, failing = "3.1.1.1", "3.2.2.2"
    rdap.set(rdap.ip_path("arin", failing), Reply.server_error(503))
    async with two_apps(shared(whois_settings, redis)) as (a, b):
        for client in (a, b):
            assert (await client.get(f"/whois/{missing}")).json()["error"]["code"] == "registration_not_found"
            assert (await client.get(f"/whois/{failing}")).status_code == 502
        assert rdap.hits[rdap.ip_path("arin", missing)] == 1  # an RDAP 404: cached, and shared
        assert rdap.hits[rdap.ip_path("arin", failing)] == 2  # a 503: neither cached nor shared
        pttl = int(redis.command("PTTL", f"ipintel:v1:whois:{missing}").decode().strip(":\r\n"))
        assert 290_000 < pttl <= 300_000
        assert f"ipintel:v1:whois:{failing}" not in redis.keys()


async def test_dns_answers_are_shared_with_their_record_ttl(
    dns_settings: Settings, dns: DnsServer, redis: RedisServer
) -> None:
    dns.add("shared.example.com", "A", "192.0.2.10", ttl=120)
    async with two_apps(shared(dns_settings, redis)) as (a, b):
        assert (await a.get("/dns/shared.example.com")).status_code == 200
        assert (await b.get("/dns/shared.example.com")).json() == (await a.get("/dns/shared.example.com")).json()
        assert dns.count("shared.example.com", "A") == 1
        pttl = int(redis.command("PTTL", "ipintel:v1:dns:dns:shared.example.com:A").decode().strip(":\r\n"))
        assert 110_000 < pttl <= 120_000
        # GeoIP records are local lookups: never in Redis.
        assert (await a.get("/ip/8.8.8.8")).status_code == 200
        assert not [key for key in redis.keys() if ":geoip:" in key]


async def test_team_cymru_answers_are_shared_per_prefix(dns: DnsServer, redis: RedisServer) -> None:
    zone = "asn.cymru.test"
    dns.add(origin_name(ipaddress.ip_address("8.8.8.8"), zone), "TXT", "15169 | 8.8.8.0/24 | US | arin | 2023-12-28")
    dns.add(f"AS15169.{zone}", "TXT", "15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US")
    store = SharedStore(redis.url)
    await store.start()
    try:
        async with Resolver(dns.servers, timeout=0.5) as resolver:
            first = CymruAsnSource(resolver, zone, shared=store)
            second = CymruAsnSource(resolver, zone, shared=store)
            assert await first.lookup(ipaddress.ip_address("8.8.8.8")) == await second.lookup(
                ipaddress.ip_address("8.8.8.9")  # another address of the same announced prefix
            )
            assert (await second.lookup(ipaddress.ip_address("8.8.8.9"))) == AsnInfo(15169, "Google LLC")
            assert await second.lookup(ipaddress.ip_address("203.0.113.9")) is None  # not announced: asked once
            assert await first.lookup(ipaddress.ip_address("203.0.113.9")) is None
        assert dns.count(suffix=True, name=f"origin.{zone}") == 2  # 8.8.8.8 and 203.0.113.9, once each
        assert dns.count(f"AS15169.{zone}", "TXT") == 1
    finally:
        await store.close()


# Redis down, slow, back ------------------------------------------------------------------------------


async def test_without_redis_everything_answers_from_process_state(settings: Settings, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    limited = settings.replace(
        redis_url=f"redis://127.0.0.1:{port}/0", rate_limits={Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10}
    )
    async with two_apps(limited) as (a, b):
        for client in (a, b):  # the full limit in each process
            answers = [await client.get("/whois/3.3.3.3") for _ in range(11)]
            assert [r.status_code != 429 for r in answers] == [True] * 10 + [False]
            assert [int(r.headers["ratelimit-remaining"]) for r in answers[:3]] == [9, 8, 7]
        ready = await a.get("/readyz")
        assert ready.status_code == 200
        check = ready.json()["data"]["checks"]["redis"]
        assert check["status"] == "degraded" and check["error"]
        text = (await a.get("/metrics")).text
        assert metric(text, "ipintel_redis_up") == 0
        assert metric(text, "ipintel_redis_failures_total") >= 1
        assert metric(text, "ipintel_redis_bypassed_total") >= 10  # no request waited for it


async def test_a_frozen_redis_costs_one_timeout_then_nothing_and_is_used_again(
    settings: Settings, redis: RedisServer
) -> None:
    limited = shared(settings, redis, rate_limits={Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10})
    async with running_app(limited) as client:
        # registry (one token every 6 s): the shared bucket still holds this request when Redis is back.
        assert (await client.get("/whois/3.3.3.3")).headers["ratelimit-remaining"] == "9"
        redis.freeze()  # accepts connections, never answers
        try:
            started = time.perf_counter()
            answers = [await client.get("/whois/3.3.3.3") for _ in range(11)]
            elapsed = time.perf_counter() - started
            assert all(r.status_code == 502 for r in answers[:10])  # the registry is unreachable here
            # One 50 ms timeout, not eleven: counted, not timed (the time bound is on a hang).
            assert metric((await client.get("/metrics")).text, "ipintel_redis_failures_total") == 1
            assert elapsed < 10, elapsed
            # The in-process bucket stands in, at the full limit.
            assert [int(r.headers["ratelimit-remaining"]) for r in answers] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]
            assert answers[10].status_code == 429
            assert (await client.get("/readyz")).json()["data"]["checks"]["redis"]["status"] == "degraded"
        finally:
            redis.thaw()
        deadline = time.monotonic() + 10
        while (await client.get("/readyz")).json()["data"]["checks"]["redis"]["status"] != "ok":
            assert time.monotonic() < deadline, "Redis not used again within 10 s"
            await asyncio.sleep(0.2)
        # Back on the shared bucket, which still holds the first request (and maybe the one that timed out:
        # it was sent, and a frozen Redis runs it once resumed).
        assert (await client.get("/whois/3.3.3.3")).headers["ratelimit-remaining"] in ("7", "8")


def test_redis_settings() -> None:
    env = {"IPINTEL_REDIS_URL": "redis://cache.internal:6379/2", "IPINTEL_REDIS_TIMEOUT": "0.1"}
    settings = Settings.from_env(env)
    assert settings.redis_url == "redis://cache.internal:6379/2" and settings.redis_timeout == 0.1
    assert Settings.from_env({}).redis_url is None and Settings().redis_timeout == 0.05
    for good in ("rediss://:secret@cache:6380/0", "unix:///run/redis.sock"):
        assert Settings.from_env({"IPINTEL_REDIS_URL": good}).redis_url == good
    for bad in ("cache:6379", "http://cache:6379", "redis://"):
        with pytest.raises(ConfigError, match="IPINTEL_REDIS_URL"):
            Settings.from_env({"IPINTEL_REDIS_URL": bad})
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"IPINTEL_REDIS_URL": "http://user:secret@cache:6379"})
    assert "secret" not in str(caught.value)  # a password never reaches the logs


async def test_without_the_setting_the_limiter_stays_in_process(settings: Settings) -> None:
    async with running_app(settings.replace(rate_limits={Quota.GENERAL: 60})) as client:
        app = client.app
        assert isinstance(app.state.limiter, RateLimiter) and app.state.intel.shared is None
        assert "redis" not in (await client.get("/readyz")).json()["data"]["checks"]


# Three processes on one Redis ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, city_db: Path
) -> Iterator[tuple[RedisServer, list[httpx.Client], FakeInternet]]:
    require_redis()
    with FakeInternet() as net, RedisServer() as redis, contextlib.ExitStack() as stack:
        env = {
            **net.env,
            "IPINTEL_GEOIP_CITY_DB": str(city_db),
            "IPINTEL_DATA_DIR": str(tmp_path_factory.mktemp("fleet")),
            "IPINTEL_FEEDS": "off",
            "IPINTEL_REDIS_URL": redis.url,
            "IPINTEL_RATE_LIMITS": "general=60,dns=30,registry=10",
            "IPINTEL_LOG_LEVEL": "WARNING",
        }
        clients = [stack.enter_context(server_process(env))[0] for _ in range(3)]
        yield redis, clients, net


def spread(clients: list[httpx.Client], path: str, count: int) -> list[httpx.Response]:
    """``count`` requests for ``path``, round robin over the processes, as fast as they answer."""
    return [clients[i % len(clients)].get(path) for i in range(count)]


def test_a_clients_limit_holds_exactly_across_three_processes(
    fleet: tuple[RedisServer, list[httpx.Client], FakeInternet],
) -> None:
    redis, clients, _ = fleet
    redis.flush()
    # registry=10: one token every 6 s, so 15 requests within a few seconds pass exactly 10 times.
    answers = spread(clients, f"/whois/{ARIN_IP}", 15)
    assert Counter(r.status_code for r in answers)[429] == 5
    assert [r.status_code != 429 for r in answers] == [True] * 10 + [False] * 5
    # general=60: 60 in all, not 180 (plus the one token a second the bucket earns meanwhile).
    started = time.monotonic()
    answers = spread(clients, "/cidr?range=10.0.0.0/8", 90)
    elapsed = time.monotonic() - started
    allowed = sum(r.status_code == 200 for r in answers)
    assert 60 <= allowed <= 60 + math.ceil(elapsed), (allowed, elapsed)
    assert answers[-1].status_code == 429


def test_a_registry_is_asked_once_for_an_address_by_three_processes(
    fleet: tuple[RedisServer, list[httpx.Client], FakeInternet],
) -> None:
    redis, clients, net = fleet
    redis.flush()
    assert net.rdap is not None
    path = net.rdap.ip_path("ripe", RIPE_IP)
    before = net.rdap.hits[path]
    answers = [client.get(f"/whois/{RIPE_IP}") for client in clients]
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert answers[0].json() == answers[1].json() == answers[2].json()
    assert net.rdap.hits[path] - before == 1


def test_redis_killed_mid_traffic_then_restarted(fleet: tuple[RedisServer, list[httpx.Client], FakeInternet]) -> None:
    redis, clients, _ = fleet
    redis.flush()
    statuses: Counter[int] = Counter()

    def traffic(client: httpx.Client, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for path in ("/cidr?range=10.0.0.0/8", f"/ip/{ARIN_IP}", "/readyz"):
                statuses[client.get(path).status_code] += 1  # an exception (no answer) fails the test

    with ThreadPoolExecutor(len(clients)) as pool:
        running = [pool.submit(traffic, client, 3.0) for client in clients]
        time.sleep(1.0)
        redis.kill()
        for future in running:
            future.result()
    assert all(status < 500 for status in statuses), statuses  # 429s, and 404s of the fixture database
    assert statuses[200] > 0
    # Limits fall back to each process's own bucket, at the full limit: 10 registry requests per process.
    for client in clients:
        assert client.get("/readyz").json()["data"]["checks"]["redis"]["status"] == "degraded"
        answers = [client.get(f"/whois/{ARIN_IP}") for _ in range(11)]
        assert [r.status_code != 429 for r in answers] == [True] * 10 + [False]

    redis.start()  # empty, on the same port
    deadline = time.monotonic() + 10
    for client in clients:
        while client.get("/readyz").json()["data"]["checks"]["redis"]["status"] != "ok":
            assert time.monotonic() < deadline, "the service did not use Redis again within 10 s of its return"
            time.sleep(0.2)
    # Shared again: one bucket for the three.
    answers = spread(clients, f"/whois/{ARIN_IP}", 12)
    assert [r.status_code != 429 for r in answers] == [True] * 10 + [False] * 2


def test_a_healthy_redis_stays_in_use_when_the_loop_is_delayed_by_100_ms(
    tmp_path_factory: pytest.TempPathFactory, city_db: Path
) -> None:
    """Issue 23, point 3: the Redis timeout was measured on the event loop, so a loop busy for 80 ms marked a
    Redis answering in 1 ms down, and each process then limited on its own: 3 x 10 registry requests, not 10.
    Three processes whose loops are held 100 ms at a time by CPU-bound work (tests/support/busy_loop.py)."""
    require_redis()
    with FakeInternet() as net, RedisServer() as redis, contextlib.ExitStack() as stack:
        env = {
            **net.env,
            "IPINTEL_GEOIP_CITY_DB": str(city_db),
            "IPINTEL_DATA_DIR": str(tmp_path_factory.mktemp("busy")),
            "IPINTEL_FEEDS": "off",
            "IPINTEL_REDIS_URL": redis.url,
            "IPINTEL_RATE_LIMITS": "general=60,dns=30,registry=10",
            "IPINTEL_LOG_LEVEL": "WARNING",
        }
        clients = [stack.enter_context(server_process(env, module="tests.support.busy_loop"))[0] for _ in range(3)]
        for client in clients:  # the registry's answer in each process's cache: the requests below ask nobody
            assert client.get(f"/whois/{ARIN_IP}").status_code == 200
            # Three processes starting at once on two cores may miss a ping: Redis is in use again within 2 s.
            assert wait_for(lambda c=client: c.get("/readyz").json()["data"]["checks"]["redis"]["status"] == "ok")  # type: ignore[misc]
        before = [
            (metric(text, "ipintel_redis_failures_total"), metric(text, "ipintel_redis_bypassed_total"))
            for text in (client.get("/metrics").text for client in clients)
        ]
        redis.flush()  # and full buckets
        latencies = []
        answers = []
        started_all = time.monotonic()
        for i in range(15):
            started = time.monotonic()
            answers.append(clients[i % 3].get(f"/whois/{ARIN_IP}"))
            latencies.append(time.monotonic() - started)
            started = time.monotonic()
            clients[(i + 1) % 3].get("/healthz")
            latencies.append(time.monotonic() - started)
            time.sleep(0.07)  # paced, so that the requests meet the loops in every phase of their load
        # The load is there: requests wait for the loop far longer than the 50 ms Redis timeout.
        assert max(latencies) > 0.05, latencies
        elapsed = time.monotonic() - started_all
        assert elapsed < 6, elapsed  # registry=10: no token earned meanwhile
        texts = [client.get("/metrics").text for client in clients]
        seen = [[line for line in text.splitlines() if line.startswith("ipintel_redis_")] for text in texts]
        assert [r.status_code != 429 for r in answers] == [True] * 10 + [False] * 5, (latencies, seen)
        after = [
            (metric(text, "ipintel_redis_failures_total"), metric(text, "ipintel_redis_bypassed_total"))
            for text in texts
        ]
        assert after == before, seen  # no Redis operation timed out, none was bypassed
        for client in clients:
            assert client.get("/readyz").json()["data"]["checks"]["redis"]["status"] == "ok"


async def test_a_password_in_the_urls_query_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 23, point 6: ``?password=`` (the only way to give a unix socket's password) was logged verbatim
    by the warnings of a Redis that fails."""
    secret = "s3cret-in-the-query"
    store = SharedStore(f"redis://127.0.0.1:{free_port()}/0?password={secret}&username=user-{secret}", timeout=0.05)
    with caplog.at_level("DEBUG", logger="ipintel"):
        await store.start()  # nothing listens there: the warning names the URL
        with contextlib.suppress(Exception):
            await store.take("k", 1.0, 60.0)
        await store.close()
    shown = [record.getMessage() for record in caplog.records]
    assert any("password=***" in line for line in shown), shown
    assert not any(secret in line for line in shown), shown
    assert secret not in store.safe_url and "username=***" in store.safe_url
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"IPINTEL_REDIS_URL": f"http://host/?password={secret}"})
    assert secret not in str(refused.value)


async def test_deployments_in_other_namespaces_share_nothing(settings: Settings, redis: RedisServer) -> None:
    """Issue 23, point 12: keys had no per-deployment part, so two deployments on one Redis database shared
    their buckets (and caches). IPINTEL_REDIS_NAMESPACE gives each its own."""
    limits = {Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 2}
    blue = shared(settings, redis, rate_limits=limits, redis_namespace="blue")
    green = shared(settings, redis, rate_limits=limits, redis_namespace="green")
    async with running_app(blue) as a, running_app(green) as b, running_app(blue) as a2:
        assert [(await a.get("/whois/3.3.3.3")).status_code != 429 for _ in range(2)] == [True, True]
        assert (await a2.get("/whois/3.3.3.3")).status_code == 429  # the same namespace: the same bucket
        assert (await b.get("/whois/3.3.3.3")).status_code != 429  # another deployment: its own bucket
    keys = redis.keys()
    assert any(k.startswith("ipintel:v1:blue:rl:registry:") for k in keys), keys
    assert any(k.startswith("ipintel:v1:green:rl:registry:") for k in keys), keys


async def test_a_password_file_authenticates_to_a_redis_that_requires_one(
    settings: Settings, redis: RedisServer, tmp_path: Path
) -> None:
    """Issue 23, point 12: the production Valkey ran without a password. IPINTEL_REDIS_PASSWORD_FILE (a mounted
    Secret) gives the service the password without putting it in the URL, the config map or a log line."""
    password = "pw-" + "x" * 20
    assert redis.command("CONFIG", "SET", "requirepass", password).startswith(b"+OK")
    secret = tmp_path / "password"
    secret.write_text(password + "\n")
    limited = shared(settings, redis, rate_limits={Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10})
    async with running_app(limited.replace(redis_password_file=secret)) as client:
        assert (await client.get("/whois/3.3.3.3")).headers["ratelimit-remaining"] == "9"
        assert (await client.get("/readyz")).json()["data"]["checks"]["redis"]["status"] == "ok"
    async with running_app(limited) as client:  # no password: Redis refuses, the service says so and goes on
        await client.get("/whois/3.3.3.3")
        check = (await client.get("/readyz")).json()["data"]["checks"]["redis"]
        assert check["status"] == "degraded" and password not in str(check)
    missing = Settings.from_env({"IPINTEL_REDIS_URL": redis.url, "IPINTEL_REDIS_PASSWORD_FILE": str(tmp_path / "no")})
    with pytest.raises(ConfigError, match="IPINTEL_REDIS_PASSWORD_FILE"):  # exit 2 at start
        Intel.from_settings(missing)
