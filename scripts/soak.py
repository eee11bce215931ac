#!/usr/bin/env python3
"""`make soak`: mixed traffic over every route and MCP tool (profiles and batches too) for a fixed time,
against the real server pointed at the local fake internet, while the fake
upstreams fail in turn (DNS slow, silent and garbled; registries 503, slow,
dropping connections and garbled; the reputation API down, slow and garbled;
the feeds down and garbled; everything at once).

1. The server starts with its feeds unreachable (they are fetched at start-up,
   then retried 1, 2, 4 ... minutes later), so it runs without them at first.
2. Warm-up, healthy upstreams: distinct addresses and names until every bounded
   cache has been filled past its bound (or ``SOAK_WARMUP_SECONDS``), so that
   what grows afterwards is a leak, not a cache filling up.
3. The measured run, ``SOAK_SECONDS``: ``SOAK_CONCURRENCY`` clients send a random
   mix while the faults take turns, each phase starting from a restored internet.

The server keeps its shared state (rate-limit buckets, upstream caches) in a
real ``redis-server`` started for the run on 127.0.0.1 (``IPINTEL_REDIS_URL``),
and one phase kills it and starts it again half-way: no request may fail for
it, and by the end of the run the server must be using Redis again
(``ipintel_redis_up`` 1). Without ``redis-server`` (``apt-get install
redis-server``) the run says so and soaks the in-process state only.

It reports requests, answers by kind, p50/p99 latency, the server's RSS (and
its anonymous part: the memory-mapped GeoIP database's pages count in VmRSS
as they are read) at the start and end of the measured run, and the feeds'
state at the end. It exits 1 on any 500 (or a JSON-RPC -32603, or an
``internal_error`` body), any 503 (the GeoIP database is always loaded here),
any request left without an answer (client timeout or dropped connection), or
RSS growth beyond ``SOAK_RSS_GROWTH_MIB``. Loopback only; the load is bounded in
time and in concurrency.

    SOAK_SECONDS=120 SOAK_CONCURRENCY=16 SOAK_RSS_GROWTH_MIB=64 python scripts/soak.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from ipintel.settings import Settings  # noqa: E402
from tests.support.app import server_process  # noqa: E402
from tests.support.fake_internet import ARIN_IP, LISTED_IP, RIPE_IP, FakeInternet  # noqa: E402
from tests.support.feeds import TOR_EXIT, VPN_SERVER_ADDRESS  # noqa: E402
from tests.support.mmdb import write_city_db  # noqa: E402
from tests.support.redis import RedisServer, redis_server_path  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "120"))
WARMUP_SECONDS = float(os.environ.get("SOAK_WARMUP_SECONDS", "60"))
CONCURRENCY = int(os.environ.get("SOAK_CONCURRENCY", "16"))
RSS_GROWTH_MIB = float(os.environ.get("SOAK_RSS_GROWTH_MIB", "64"))
CLIENT_TIMEOUT = 15.0  # well above every upstream timeout: hitting it means the server did not answer
CACHE_BOUND = Settings().cache_max_entries

PUBLIC = [
    "8.8.8.8", "8.8.4.4", "1.1.1.1", "81.2.69.142", "12.0.1.1", ARIN_IP, RIPE_IP, LISTED_IP,
    VPN_SERVER_ADDRESS, TOR_EXIT, "2001:4860:4860::8888", "2001:4860::1",
]  # fmt: skip
V4 = [a for a in PUBLIC if ":" not in a]
Request = tuple[str, str, bytes | None]


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and RssAnon of a process, in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def mcp(method: str, params: dict[str, object] | None = None) -> bytes:
    body: dict[str, object] = {"jsonrpc": "2.0", "id": random.randint(1, 10**9), "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode()


def mcp_call(tool: str, arguments: dict[str, object]) -> Request:
    return ("POST", "/mcp", mcp("tools/call", {"name": tool, "arguments": arguments}))


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}},
    }
).encode()


def random_v4() -> str:
    return f"{random.randint(1, 223)}.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def batch(ips: list[str], include: list[str] | None = None) -> Request:
    body: dict[str, object] = {"ips": ips} if include is None else {"ips": ips, "include": include}
    return ("POST", "/ip/batch", json.dumps(body).encode())


PARTS = ["geo", "vpn", "whois", "blacklist", "ptr"]


def some_parts() -> list[str]:
    return random.sample(PARTS, random.randint(1, len(PARTS)))


def next_request() -> Request:
    """One request of the mix: every route and tool, valid and invalid input, cached and not."""
    ip = random.choice(PUBLIC)
    v4 = random.choice(V4)
    rtype = random.choice(["A", "AAAA", "MX", "TXT", "NS", "CNAME"])
    choices: list[Request] = [
        ("GET", f"/ip/{ip}", None),
        ("GET", f"/ip/{random_v4()}", None),
        ("GET", f"/ip/{ip}/vpn", None),
        ("GET", f"/ip/{random_v4()}/vpn", None),
        ("GET", "/ip", None),  # the caller: 127.0.0.1, a reserved address (422)
        ("GET", f"/cidr?range=10.{random.randint(0, 255)}.0.0/{random.randint(0, 32)}", None),
        ("GET", f"/cidr?range=2001:db8::/{random.randint(0, 128)}", None),
        ("GET", f"/dns/example.com?type={rtype}", None),
        ("GET", "/dns/www.example.com?type=A", None),
        ("GET", f"/dns/nx{random.randint(0, 10**6)}.example.com", None),
        ("GET", "/dns/8.8.8.8/reverse", None),
        ("GET", "/dns/2001:4860:4860::8888/reverse", None),
        ("GET", f"/whois/{random.choice([ARIN_IP, RIPE_IP])}", None),
        ("GET", f"/whois/3.{random.randint(0, 127)}.{random.randint(0, 255)}.1", None),
        ("GET", f"/blacklist/{v4}", None),
        ("GET", f"/ip/{ip}/profile", None),
        ("GET", f"/ip/{random.choice([ARIN_IP, RIPE_IP, LISTED_IP])}/profile?include={','.join(some_parts())}", None),
        ("GET", f"/ip/{random_v4()}/profile?include=geo,vpn", None),
        ("GET", "/ip/10.1.2.3/profile", None),
        ("GET", f"/ip/{ip}/profile?include=nope", None),
        # a batch of known, random, duplicate, malformed and reserved addresses, with every part
        batch([*random.sample(PUBLIC, 4), f"::ffff:{v4}", v4, "not-an-ip", "192.168.1.1", random_v4()], some_parts()),
        batch([random_v4() for _ in range(random.randint(1, 100))]),  # geo and vpn: local, no token per address
        ("POST", "/ip/batch", b'{"ips": "8.8.8.8"}'),  # 400 invalid_request
        ("GET", f"/ip/not-an-ip-{random.randint(0, 99)}", None),
        ("GET", "/ip/10.1.2.3", None),
        ("GET", "/dns/-bad-.com", None),
        ("GET", "/healthz", None),
        ("GET", "/readyz", None),
        ("GET", "/metrics", None),
        ("GET", "/openapi.json", None),
        ("POST", "/mcp", INITIALIZE),
        ("POST", "/mcp", mcp("tools/list")),
        mcp_call("lookup_ip", {"ip": ip}),
        mcp_call("calculate_cidr", {"range": "192.168.1.0/24"}),
        mcp_call("lookup_dns", {"domain": "example.com", "type": rtype}),
        mcp_call("lookup_dns", {"ip": "8.8.8.8"}),
        mcp_call("whois_ip", {"ip": random.choice([ARIN_IP, RIPE_IP])}),
        mcp_call("check_blacklist", {"ip": v4}),
        mcp_call("detect_vpn", {"ip": ip}),
        mcp_call("lookup_ip", {"ip": "not an address"}),
        mcp_call("profile_ip", {"ip": ip, "include": some_parts()}),
        mcp_call("lookup_ips", {"ips": [*random.sample(PUBLIC, 3), "10.0.0.1", "bad"], "include": some_parts()}),
    ]
    return random.choice(choices)


def warm_requests() -> Iterator[Request]:
    """Distinct keys for every cache, round-robin, until the GeoIP (addresses and verdicts),
    DNS and RDAP caches have each seen 1.2 times their bound."""
    for i in range(int(CACHE_BOUND * 1.2)):
        a, b, c = 1 + i % 223, (i // 223) % 256, (i // (223 * 256)) % 256
        address = f"{a}.{b}.{c}.9"
        yield ("GET", f"/ip/{address}", None)
        yield ("GET", f"/ip/{address}/vpn", None)
        yield ("GET", f"/dns/warm{i}.example.com", None)
        yield ("GET", f"/whois/3.{i % 128}.{(i // 128) % 256}.2", None)
        if i % 4 == 0:  # two DNSBL queries and a reputation call each: a quarter of the rate is plenty
            yield ("GET", f"/blacklist/{address}", None)


# The measured run's phases: each starts from a restored fake internet, then applies its faults.
PHASES: list[tuple[str, Callable[[FakeInternet], None]]] = [
    ("healthy (the feeds come back)", lambda net: None),
    ("DNS slow (0.15 s, answered)", lambda net: net.dns_slow(0.15)),
    ("DNS slow (0.4 s: timeouts)", lambda net: net.dns_slow(0.4)),
    ("DNS down (silence)", lambda net: net.dns_down()),
    ("DNS garbage (SERVFAIL, rewritten DNSBL answers, bad Cymru TXT)", lambda net: net.dns_garbage()),
    ("RDAP 503", lambda net: net.rdap_failing(503)),
    ("RDAP slow (3 s: timeouts)", lambda net: net.rdap_slow(3.0)),
    ("RDAP dropping connections", lambda net: net.rdap_down()),
    ("RDAP garbage (truncated JSON, an HTML 429)", lambda net: net.rdap_garbage()),
    ("reputation API down (503)", lambda net: net.reputation_down()),
    ("reputation API slow (4 s) ", lambda net: net.reputation_slow(4.0)),
    ("reputation API garbage, feeds down", lambda net: net.apply("reputation_garbage", "feeds_down")),
    ("everything down at once", lambda net: net.apply("dns_down", "rdap_down", "reputation_slow", "feeds_down")),
]
# The phase in which Redis is killed, then started again (empty, same port) half-way (see faults()).
REDIS_PHASE = "Redis killed, restarted half-way"


class Tally:
    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def record(self, method: str, path: str, status: int, payload: bytes, seconds: float) -> None:
        self.latencies.append(seconds)
        kind = str(status)
        problem = None
        if status == 500 or status == 503 or (status >= 500 and status not in (502, 504)):
            problem = f"{status}"
        elif path == "/mcp" and status == 200:
            answers = json.loads(payload)
            for answer in answers if isinstance(answers, list) else [answers]:
                if "error" in answer:
                    kind = f"200 mcp error {answer['error']['code']}"
                    problem = "JSON-RPC -32603" if answer["error"]["code"] == -32603 else problem
                elif answer.get("result", {}).get("isError"):
                    error = json.loads(answer["result"]["content"][0]["text"])["error"]
                    kind = f"200 mcp isError {error['code']}"
                    problem = "tool internal_error" if error["code"] == "internal_error" else problem
                else:
                    kind = "200 mcp ok"
        elif status == 200 and path.startswith("/ip/") and b'"internal_error"' in payload:  # a profile's part
            problem = "internal_error in an answer"
        elif status >= 400 and path != "/mcp":
            code = json.loads(payload)["error"]["code"]
            kind = f"{status} {code}"
            problem = "internal_error" if code == "internal_error" else None
        self.kinds[kind] += 1
        if problem:
            self.failures.append(f"{method} {path}: {problem}: {payload[:200]!r}")

    def no_answer(self, method: str, path: str, exc: BaseException) -> None:
        self.kinds["no answer"] += 1
        self.failures.append(f"{method} {path}: no answer ({type(exc).__name__})")

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


REDIS_UP = re.compile(r"^ipintel_redis_up ([\d.]+)$", re.M)
FEED_STATUS = re.compile(r'^ipintel_feed_status\{feed="(\w+)",status="(\w+)"\} 1(\.0)?$', re.M)


async def soak(base: str, pid: int, net: FakeInternet, redis: RedisServer | None = None) -> int:
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    json_headers = {"Content-Type": "application/json"}
    tally = Tally()
    deadline = 0.0  # per stage; the workers read it

    async with aiohttp.ClientSession(base, timeout=timeout, connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:

        async def send(tally: Tally, request: Request) -> None:
            method, path, body = request
            started = time.perf_counter()
            try:
                async with http.request(method, path, data=body, headers=json_headers if body else None) as response:
                    payload = await response.read()
                    status = response.status
            except (TimeoutError, aiohttp.ClientError) as exc:
                tally.no_answer(method, path, exc)
                return
            tally.record(method, path, status, payload, time.perf_counter() - started)

        async def worker(tally: Tally, requests: Iterator[Request]) -> None:
            while time.monotonic() < deadline:
                request = next(requests, None)  # one iterator shared by the workers of a stage
                if request is None:
                    return
                await send(tally, request)

        def mix() -> Iterator[Request]:
            while True:
                yield next_request()

        # Warm-up: fill the caches past their bounds with distinct keys, healthy upstreams
        # (the feeds excepted), then a few seconds of the mix; the baseline is taken after it.
        warm = Tally()
        started = time.monotonic()
        deadline = started + WARMUP_SECONDS
        keys = warm_requests()
        await asyncio.gather(*(worker(warm, keys) for _ in range(CONCURRENCY)))
        deadline = time.monotonic() + 5.0
        await asyncio.gather(*(worker(warm, mix()) for _ in range(CONCURRENCY)))
        print(f"  warm-up: {warm.kinds.total()} requests in {time.monotonic() - started:.0f} s")
        tally.failures.extend(warm.failures)
        memory_start = memory_mib(pid)
        print(f"  RSS after warm-up: {memory_start['VmRSS']:.1f} MiB (anonymous {memory_start['RssAnon']:.1f})")

        phases = [*PHASES, *([(REDIS_PHASE, lambda net: None)] if redis is not None else [])]

        async def faults() -> None:
            phase = max(SECONDS / len(phases), 1.0)
            for name, apply in phases:
                if time.monotonic() >= deadline:
                    return
                elapsed = SECONDS - (deadline - time.monotonic())
                print(f"  [{elapsed:6.1f} s] {name}", flush=True)
                await asyncio.to_thread(net.restore)
                await asyncio.to_thread(apply, net)
                if name == REDIS_PHASE and redis is not None:
                    await asyncio.to_thread(redis.kill)
                    await asyncio.sleep(min(phase / 2, max(0.0, deadline - time.monotonic())))
                    await asyncio.to_thread(redis.start)
                    await asyncio.sleep(min(phase / 2, max(0.0, deadline - time.monotonic())))
                    continue
                await asyncio.sleep(min(phase, max(0.0, deadline - time.monotonic())))
            await asyncio.to_thread(net.restore)

        deadline = time.monotonic() + SECONDS
        started = time.monotonic()
        await asyncio.gather(faults(), *(worker(tally, mix()) for _ in range(CONCURRENCY)))
        elapsed = time.monotonic() - started
        await asyncio.to_thread(net.restore)
        if redis is not None and not redis.answers():
            await asyncio.to_thread(redis.start)  # the run ended inside the Redis phase's first half
        await asyncio.sleep(1.0)
        memory_end = memory_mib(pid)
        async with http.get("/metrics") as response:
            metrics = await response.text()
            feeds = Counter(status for _feed, status, _ in FEED_STATUS.findall(metrics))
        redis_up = None
        if redis is not None:  # back within 10 s of its return: the recovery pings every 2 s
            for _ in range(50):
                async with http.get("/metrics") as response:
                    redis_up = REDIS_UP.search(await response.text())
                if redis_up and float(redis_up.group(1)) == 1:
                    break
                await asyncio.sleep(0.2)

    total = tally.kinds.total()
    print(f"\nrequests: {total} in {elapsed:.0f} s ({total / elapsed:.0f}/s), {CONCURRENCY} concurrent")
    for kind, count in sorted(tally.kinds.items()):
        print(f"  {kind:>42}: {count}")
    print(
        f"latency: p50 {tally.percentile(0.5):.1f} ms, p99 {tally.percentile(0.99):.1f} ms, "
        f"max {tally.percentile(1.0):.1f} ms"
    )
    growth = memory_end["VmRSS"] - memory_start["VmRSS"]
    anon_growth = memory_end["RssAnon"] - memory_start["RssAnon"]
    print(
        f"RSS: {memory_start['VmRSS']:.1f} MiB at start, {memory_end['VmRSS']:.1f} MiB at end ({growth:+.1f} MiB); "
        f"anonymous {memory_start['RssAnon']:.1f} -> {memory_end['RssAnon']:.1f} MiB ({anon_growth:+.1f}); "
        f"bound {RSS_GROWTH_MIB:g} MiB"
    )
    print(f"feeds at the end: {dict(feeds)}")
    failed = False
    if redis is not None:
        up = redis_up is not None and float(redis_up.group(1)) == 1
        print(f"Redis at the end: {'in use again' if up else 'NOT IN USE'}")
        if not up:
            failed = True
            print("\nFAILED: the server did not use Redis again after it came back")
    if tally.failures:
        failed = True
        print(f"\nFAILED: {len(tally.failures)} requests got a 500, a 503, an internal error or no answer, e.g.:")
        for line in tally.failures[:10]:
            print("  " + line)
    if growth > RSS_GROWTH_MIB or anon_growth > RSS_GROWTH_MIB:
        failed = True
        print(f"\nFAILED: RSS grew by {growth:.1f} MiB (anonymous {anon_growth:.1f} MiB)")
    print("\nsoak: " + ("FAILED" if failed else "passed"))
    return 1 if failed else 0


def main() -> int:
    real = ROOT / "data" / "dbip-city-lite.mmdb"
    with tempfile.TemporaryDirectory(prefix="ipintel-soak-") as tmp:
        city = real if real.exists() else write_city_db(Path(tmp) / "city.mmdb")
        with FakeInternet() as net:
            env = {
                **net.env,
                "IPINTEL_GEOIP_CITY_DB": str(city),
                "IPINTEL_DATA_DIR": tmp,
                "IPINTEL_RATE_LIMITS": "general=1000000,dns=1000000,registry=1000000",
                "IPINTEL_LOG_LEVEL": "WARNING",
            }
            print(f"soak: {SECONDS:g} s against the real server ({city.name}) and the local fake internet")
            net.feeds_down()  # the first fetch fails: the server starts without its feeds
            with contextlib.ExitStack() as stack:
                redis = None
                if redis_server_path() is not None:
                    redis = stack.enter_context(RedisServer())
                    env["IPINTEL_REDIS_URL"] = redis.url
                    print(f"shared state in {redis.url} (redis-server), killed and restarted in one phase")
                else:
                    print("redis-server not installed: no Redis phase (apt-get install redis-server)")
                client, proc = stack.enter_context(server_process(env))
                return asyncio.run(soak(str(client.base_url).rstrip("/"), proc.pid, net, redis))


if __name__ == "__main__":
    raise SystemExit(main())
