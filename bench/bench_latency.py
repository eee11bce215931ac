"""Issue 9: p50/p99 latency of every route on its cached path, at a fixed request rate.

wrk 4 is closed-loop (it waits for each answer before the next request), which
hides queueing; this sends requests open-loop instead: request i is due at
``i / RATE`` seconds whatever happened before, and its latency is counted from
that due time, so a stall shows up in the percentiles instead of slowing the
sender (no coordinated omission). Each route is warmed first so that its cache
answers; the upstreams are the local fake internet. The figures include the
Python client's own cost, on the same machine as the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from common import city_db, ipintel_server, row

from tests.support.fake_internet import ARIN_IP, LISTED_IP, FakeInternet

RATE = 200  # requests per second per route
SECONDS = 3.0


def tool_call(name: str, arguments: dict[str, str]) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return json.dumps(body).encode()


# (method, label whose first word is the path, body, cached): /cidr is never cached (docs/API.md#caching),
# it is cheaper.
ROUTES: list[tuple[str, str, bytes | None, bool]] = [
    ("GET", "/ip/8.8.8.8", None, True),
    ("GET", "/ip/8.8.8.8/vpn", None, True),
    ("GET", "/cidr?range=10.0.0.0/8", None, False),
    ("GET", "/dns/example.com?type=MX", None, True),
    ("GET", "/dns/8.8.8.8/reverse", None, True),
    ("GET", f"/whois/{ARIN_IP}", None, True),
    ("GET", f"/blacklist/{LISTED_IP}", None, True),
    ("POST", "/mcp (tools/call lookup_ip)", tool_call("lookup_ip", {"ip": "8.8.8.8"}), True),
    ("POST", "/mcp (tools/call calculate_cidr)", tool_call("calculate_cidr", {"range": "10.0.0.0/8"}), False),
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
    """One request, sent at its due time; its latency counts from that time. A request
    without an answer (10 s) counts as status 0, an error."""
    await asyncio.sleep(max(0.0, due - time.perf_counter()))
    try:
        async with http.request(method, path, data=body, headers=headers) as response:
            await response.read()
            statuses.append(response.status)
    except (TimeoutError, aiohttp.ClientError):
        statuses.append(0)
    latencies.append(time.perf_counter() - due)


async def measure(base: str) -> list[tuple[str, bool, float, float, int]]:
    results = []
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=64), timeout=timeout) as http:
        for method, label, body, cached in ROUTES:
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
            errors = sum(1 for status in statuses if status != 200)
            latencies.sort()
            p50 = latencies[len(latencies) // 2] * 1000
            p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
            results.append((f"{method} {label}", cached, p50, p99, errors))
    return results


def main() -> list[dict[str, object]]:
    # A data directory of its own: the fake internet's feed snapshots must never land in ./data.
    with FakeInternet() as net, tempfile.TemporaryDirectory(prefix="ipintel-bench-") as data_dir:
        env = {**net.env, "IPINTEL_GEOIP_CITY_DB": str(city_db()), "IPINTEL_FEEDS": "on", "IPINTEL_DATA_DIR": data_dir}
        with ipintel_server(env) as port:
            time.sleep(2.0)  # feeds load in the background
            results = asyncio.run(measure(f"http://127.0.0.1:{port}"))
    return [
        row(
            f"{label} at {RATE} req/s (open loop, {'cached' if cached else 'never cached'})",
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms (errors {errors})",
            "-",
            None if errors == 0 else False,
        )
        for label, cached, p50, p99, errors in results
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
