"""Issue 4: one blacklist check costs about one DNS round trip, not one per zone.

Six DNSBL zones are served by the test DNS server (tests/support/dns_server.py)
on 127.0.0.1, which answers every query 50 ms late (each answer in its own
task, so concurrent queries are answered concurrently, as a real recursive
resolver does). Measured in the same run, through the service's own
resolver and ``blacklist.check``:

- one DNS query (the round trip: 50 ms plus the per-query overhead);
- the sequential sum: 6 x that, what asking the zones one after another costs;
- one blacklist check over the 6 zones (self-tests already passed, as in a
  running service).

Target: the check takes at most 1.5 x 50 ms plus the per-query overhead
measured in the run (one query's time minus the 50 ms delay). Medians of
several runs, so one scheduler hiccup does not decide the figure.
"""

from __future__ import annotations

import asyncio
import ipaddress
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ipintel.capabilities import blacklist  # noqa: E402
from ipintel.infra.resolver import NxDomain, Resolver  # noqa: E402
from tests.support.dns_server import DnsServer  # noqa: E402
from tests.support.dnsbl import healthy_list, query_name  # noqa: E402

ZONES = [f"list{i}.bench.test" for i in range(6)]
DELAY = 0.050
RUNS = 15
IP = ipaddress.IPv4Address("8.8.8.8")  # not listed: every zone answers NXDOMAIN, as for most addresses


async def _one_query(resolver: Resolver) -> float:
    started = time.perf_counter()
    try:
        await resolver.query(query_name(str(IP), ZONES[0]), "A", timeout=2.0)
    except NxDomain:
        pass
    return time.perf_counter() - started


async def _one_check(resolver: Resolver, zones: tuple[blacklist.Zone, ...], tests: blacklist.SelfTests) -> float:
    started = time.perf_counter()
    result = await blacklist.check(
        IP, zones=zones, resolver=resolver, tests=tests, reputation=None, deadline=3.0, dns_timeout=2.0
    )
    elapsed = time.perf_counter() - started
    if result["status"] != "clear":
        raise RuntimeError(f"the benchmark check did not come out clear: {result}")
    return elapsed


async def _measure(dns: DnsServer) -> tuple[float, float]:
    zones = blacklist.build_zones(ZONES)
    async with Resolver(dns.servers, timeout=2.0) as resolver:
        tests = blacklist.SelfTests(zones, resolver=resolver, timeout=2.0)
        outcomes = await tests.run_once()
        if any(o.verdict != "passed" for o in outcomes):
            raise RuntimeError(f"self-tests did not pass: {outcomes}")
        await _one_query(resolver)  # warm-up: sockets open
        await _one_check(resolver, zones, tests)
        singles, checks = [], []
        for _ in range(RUNS):  # interleaved, so both see the same machine state
            singles.append(await _one_query(resolver))
            checks.append(await _one_check(resolver, zones, tests))
        await tests.close()
    return statistics.median(singles), statistics.median(checks)


def main() -> list[dict[str, object]]:
    with DnsServer(delay=DELAY) as dns:
        for zone in ZONES:
            healthy_list(dns, zone)
        single, check = asyncio.run(_measure(dns))
    n = len(ZONES)
    sequential = n * single
    overhead = max(0.0, single - DELAY)
    target = 1.5 * DELAY + overhead
    ms = 1000
    return [
        {
            "figure": f"one DNS query, server answering after {DELAY * ms:.0f} ms (median of {RUNS})",
            "value": f"{single * ms:.1f} ms",
            "target": "-",
            "ok": None,
        },
        {
            "figure": f"sequential sum: {n} zones x one query",
            "value": f"{sequential * ms:.1f} ms",
            "target": "-",
            "ok": None,
        },
        {
            "figure": f"one blacklist check over {n} zones (median of {RUNS})",
            "value": f"{check * ms:.1f} ms = {check / single:.2f}x one query, {sequential / check:.1f}x faster than sequential",
            "target": f"<= 1.5 x {DELAY * ms:.0f} ms + per-query overhead {overhead * ms:.1f} ms = {target * ms:.1f} ms",
            "ok": check <= target,
        },
    ]


if __name__ == "__main__":
    for row in main():
        print(row)
