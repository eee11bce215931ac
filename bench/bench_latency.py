"""Issue 9: p50/p99 latency of every route on its cached path, at a fixed request rate.

wrk 4 is closed-loop (it waits for each answer before the next request), which
hides queueing; this sends requests open-loop instead: request i is due at
``i / RATE`` seconds whatever happened before, and its latency is counted from
that due time, so a stall shows up in the percentiles instead of slowing the
sender (no coordinated omission). Each route is warmed first so that its cache
answers; the upstreams are the local fake internet.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from common import city_db, ipintel_server, row

from tests.support.fake_internet import ARIN_IP, LISTED_IP, FakeInternet

RATE = 200  # requests per second per route
SECONDS = 3.0
MCP_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "calculate_cidr", "arguments": {"range": "10.0.0.0/8"}},
    }
).encode()
ROUTES: list[tuple[str, str, bytes | None]] = [
    ("GET", "/ip/8.8.8.8", None),
    ("GET", "/ip/8.8.8.8/vpn", None),
    ("GET", "/cidr?range=10.0.0.0/8", None),
    ("GET", "/dns/example.com?type=MX", None),
    ("GET", "/dns/8.8.8.8/reverse", None),
    ("GET", f"/whois/{ARIN_IP}", None),
    ("GET", f"/blacklist/{LISTED_IP}", None),
    ("POST", "/mcp (tools/call calculate_cidr)", MCP_BODY),
]


async def fire(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str] | None,
    due: float,
    latencies: list[float],
    statuses: list[int],
) -> None:
    """One request, sent at its due time; its latency counts from that time."""
    await asyncio.sleep(max(0.0, due - time.perf_counter()))
    async with http.request(method, path, data=body, headers=headers) as response:
        await response.read()
        statuses.append(response.status)
    latencies.append(time.perf_counter() - due)


async def measure(base: str) -> list[tuple[str, float, float, int]]:
    results = []
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=64)) as http:
        for method, label, body in ROUTES:
            path = label.split(" ")[0]
            headers = {"Content-Type": "application/json"} if body else None
            for _ in range(3):  # warm: fills the cache, opens connections
                async with http.request(method, path, data=body, headers=headers) as response:
                    await response.read()
            latencies: list[float] = []
            statuses: list[int] = []
            start = time.perf_counter() + 0.05
            count = int(RATE * SECONDS)
            await asyncio.gather(
                *(fire(http, method, path, body, headers, start + i / RATE, latencies, statuses) for i in range(count))
            )
            errors = sum(1 for status in statuses if status >= 500 or status == 429)
            latencies.sort()
            p50 = latencies[len(latencies) // 2] * 1000
            p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
            results.append((f"{method} {label}", p50, p99, errors))
    return results


def main() -> list[dict[str, object]]:
    with FakeInternet() as net:
        env = {**net.env, "IPINTEL_GEOIP_CITY_DB": str(city_db()), "IPINTEL_FEEDS": "on"}
        with ipintel_server(env) as port:
            time.sleep(2.0)  # feeds load in the background
            results = asyncio.run(measure(f"http://127.0.0.1:{port}"))
    return [
        row(
            f"{label} at {RATE} req/s (open loop, cached)",
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms (errors {errors})",
            "-",
            None if errors == 0 else False,
        )
        for label, p50, p99, errors in results
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
