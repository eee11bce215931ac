#!/usr/bin/env python3
"""`make soak`: mixed traffic over every route and MCP tool for a fixed time,
against the real server pointed at the local fake internet, while the fake
upstreams fail in turn (DNS timeouts, RDAP 5xx and slowness, garbage from the
reputation API, feeds down).

It reports requests, answers by status, p50/p99 latency and the server's RSS
at start and end, and exits 1 on any 500, any request left without an answer
(client timeout or dropped connection), or RSS growth beyond the bound.
Loopback only; the load loop is bounded in time and in concurrency.

    SOAK_SECONDS=120 SOAK_CONCURRENCY=16 SOAK_RSS_GROWTH_MIB=64 python scripts/soak.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from tests.support.app import server_process  # noqa: E402
from tests.support.fake_internet import ARIN_IP, LISTED_IP, RIPE_IP, FakeInternet  # noqa: E402
from tests.support.mmdb import write_city_db  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "120"))
CONCURRENCY = int(os.environ.get("SOAK_CONCURRENCY", "16"))
RSS_GROWTH_MIB = float(os.environ.get("SOAK_RSS_GROWTH_MIB", "64"))
CLIENT_TIMEOUT = 15.0  # well above every upstream timeout: hitting it means the server did not answer

PUBLIC = ["8.8.8.8", "8.8.4.4", "1.1.1.1", "81.2.69.142", "12.0.1.1", ARIN_IP, RIPE_IP, LISTED_IP, "2001:4860::1"]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def mcp_call(tool: str, arguments: dict[str, object]) -> tuple[str, str, bytes]:
    body = {"jsonrpc": "2.0", "id": random.randint(1, 10**9), "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}  # fmt: skip
    return ("POST", "/mcp", json.dumps(body).encode())


def next_request() -> tuple[str, str, bytes | None]:
    ip = random.choice(PUBLIC)
    v4 = random.choice([a for a in PUBLIC if ":" not in a])
    choices: list[tuple[str, str, bytes | None]] = [
        ("GET", f"/ip/{ip}", None),
        ("GET", f"/ip/{random.randint(1, 223)}.{random.randint(0, 255)}.{random.randint(0, 255)}.7", None),
        ("GET", f"/ip/{ip}/vpn", None),
        ("GET", f"/cidr?range=10.{random.randint(0, 255)}.0.0/{random.randint(0, 32)}", None),
        ("GET", "/cidr?range=2001:db8::/48", None),
        ("GET", f"/dns/example.com?type={random.choice(['A', 'AAAA', 'MX', 'TXT', 'NS', 'CNAME'])}", None),
        ("GET", f"/dns/nx{random.randint(0, 10**6)}.example.com", None),
        ("GET", "/dns/8.8.8.8/reverse", None),
        ("GET", f"/whois/{random.choice([ARIN_IP, RIPE_IP])}", None),
        ("GET", f"/blacklist/{v4}", None),
        ("GET", f"/ip/not-an-ip-{random.randint(0, 99)}", None),
        ("GET", "/ip/10.1.2.3", None),
        ("GET", "/healthz", None),
        mcp_call("lookup_ip", {"ip": ip}),
        mcp_call("calculate_cidr", {"range": "192.168.1.0/24"}),
        mcp_call("lookup_dns", {"domain": "example.com", "type": "MX"}),
        mcp_call("whois_ip", {"ip": ARIN_IP}),
        mcp_call("check_blacklist", {"ip": LISTED_IP}),
        mcp_call("detect_vpn", {"ip": ip}),
    ]
    return random.choice(choices)


FAULTS = [
    ("healthy", lambda net: net.restore()),
    ("DNS slow (0.3 s a query)", lambda net: net.dns_slow(0.3)),
    ("DNS down (timeouts)", lambda net: net.dns_down()),
    ("RDAP 503", lambda net: (net.restore(), net.rdap_failing(503))),
    ("RDAP slow (3 s)", lambda net: net.rdap_slow(3.0)),
    ("RDAP garbage", lambda net: net.rdap_garbage()),
    ("reputation garbage and slow", lambda net: (net.reputation_garbage(), net.reputation_slow(4.0))),
    ("feeds down", lambda net: (net.restore(), net.feeds_down())),
]


async def soak(base: str, pid: int, net: FakeInternet) -> int:
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    failures: list[str] = []
    deadline = 0.0  # set per stage below; the workers read it
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    headers = {"Content-Type": "application/json"}

    async with aiohttp.ClientSession(base, timeout=timeout, connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:

        async def worker() -> None:
            while time.monotonic() < deadline:
                method, path, body = next_request()
                started = time.perf_counter()
                try:
                    async with http.request(method, path, data=body, headers=headers if body else None) as response:
                        payload = await response.read()
                        status = response.status
                except (TimeoutError, aiohttp.ClientError) as exc:
                    statuses["no answer"] += 1
                    failures.append(f"{method} {path}: no answer ({type(exc).__name__})")
                    continue
                latencies.append(time.perf_counter() - started)
                kind = f"{status}"
                if path == "/mcp" and status == 200:
                    result = json.loads(payload).get("result", {})
                    kind = "200 mcp isError" if result.get("isError") else "200 mcp ok"
                statuses[kind] += 1
                if status >= 500 and status not in (502, 503, 504):
                    failures.append(f"{method} {path}: {status} {payload[:200]!r}")

        async def faults() -> None:
            phase = max(SECONDS / len(FAULTS), 1.0)
            for name, apply in FAULTS:
                if time.monotonic() >= deadline:
                    return
                print(f"  [{SECONDS - (deadline - time.monotonic()):6.1f} s] {name}", flush=True)
                await asyncio.to_thread(apply, net)
                await asyncio.sleep(phase)
            await asyncio.to_thread(net.restore)

        # Warm-up with healthy upstreams until the bounded caches have filled
        # (a quarter of the run, at most 30 s): growth after it is what a leak shows.
        deadline = time.monotonic() + min(30.0, SECONDS / 4)
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        warm = sum(statuses.values())
        statuses.clear()
        latencies.clear()
        rss_start = rss_mib(pid)
        print(f"  warm-up: {warm} requests, RSS {rss_start:.1f} MiB", flush=True)
        deadline = time.monotonic() + SECONDS  # the measured run, with the faults
        started = time.monotonic()
        await asyncio.gather(faults(), *(worker() for _ in range(CONCURRENCY)))
        elapsed = time.monotonic() - started
        await asyncio.sleep(1.0)
        rss_end = rss_mib(pid)

    latencies.sort()
    total = sum(statuses.values())

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

    growth = rss_end - rss_start
    print(f"\nrequests: {total} in {elapsed:.0f} s ({total / elapsed:.0f}/s), {CONCURRENCY} concurrent")
    for kind, count in sorted(statuses.items()):
        print(f"  {kind:>18}: {count}")
    print(f"latency: p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, max {pct(1.0):.1f} ms")
    print(f"RSS: {rss_start:.1f} MiB at start, {rss_end:.1f} MiB at end ({growth:+.1f} MiB; bound {RSS_GROWTH_MIB:g})")
    failed = False
    if failures:
        failed = True
        print(f"\nFAILED: {len(failures)} requests got a 500 or no answer, e.g.:")
        for line in failures[:10]:
            print("  " + line)
    if growth > RSS_GROWTH_MIB:
        failed = True
        print(f"\nFAILED: RSS grew by {growth:.1f} MiB")
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
            with server_process(env) as (client, proc):
                return asyncio.run(soak(str(client.base_url).rstrip("/"), proc.pid, net))


if __name__ == "__main__":
    raise SystemExit(main())
