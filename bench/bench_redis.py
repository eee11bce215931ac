"""Issue 16: what the Redis round trip costs a limited request (``IPINTEL_REDIS_URL``).

Cached ``GET /ip/8.8.8.8`` through the whole HTTP stack (hypercorn, the middleware, the GeoIP cache
answering every request after the first) against two ipintel processes that differ only in where the
rate-limit buckets are: in the process (the default) and in a real ``redis-server`` on 127.0.0.1 (one
EVALSHA per request). Limits are far above what the run reaches, so every request is allowed and the
two do the same work but for the bucket.

Two figures: the throughput of each with the servers loaded one after the other (each alone on its CPU,
rounds rotating; ``compare`` in common.py), from which the per-request CPU cost difference follows
(1/throughput, the server being CPU-bound), and the latency of one request at a time (one connection),
where the round trip shows whole. There is no target: it is reported, for deciding whether the fleet
is worth its round trip. Skipped (reported as such) when redis-server is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, compare, errors, ipintel_server, load, median_rps, row

SECONDS = 3.0
ROUNDS = 4
CONNECTIONS = 32
PATH = "/ip/8.8.8.8"
HIGH_LIMITS = "general=1000000,dns=1000000,registry=1000000"


def main() -> list[dict[str, object]]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.support.redis import RedisServer, redis_server_path

    if redis_server_path() is None:
        return [row("Redis round trip on a limited request", "skipped: apt-get install redis-server", "-", None)]
    with (
        RedisServer() as redis,
        ipintel_server({"IPINTEL_RATE_LIMITS": HIGH_LIMITS}) as local_port,
        ipintel_server({"IPINTEL_RATE_LIMITS": HIGH_LIMITS, "IPINTEL_REDIS_URL": redis.url}) as redis_port,
    ):
        urls = {
            "local": f"http://127.0.0.1:{local_port}{PATH}",
            "redis": f"http://127.0.0.1:{redis_port}{PATH}",
        }
        runs = compare(urls, rounds=ROUNDS, seconds=SECONDS, connections=CONNECTIONS)
        single = {name: [load(url, seconds=SECONDS, connections=1) for _ in range(2)] for name, url in urls.items()}
        # The buckets themselves expire as soon as they are full again (microseconds at these limits), so
        # what shows the limits went through Redis is the scripts it ran: one per request.
        stats = redis.command("INFO", "commandstats").decode("latin-1")
        scripts = sum(
            int(line.split("calls=")[1].split(",")[0])
            for line in stats.splitlines()
            if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:"))
        )
    local_rps, redis_rps = median_rps(runs["local"]), median_rps(runs["redis"])
    cost_us = (1 / redis_rps - 1 / local_rps) * 1e6 if local_rps and redis_rps else float("nan")
    p50 = {name: min(x.p50_ms or float("inf") for x in loads) for name, loads in single.items()}
    failures = errors(runs["local"]) + errors(runs["redis"]) + sum(errors(v) for v in single.values())
    tool = runs["local"][0].tool
    return [
        row(
            f"GET {PATH} cached, limits in process ({tool}, {CONNECTIONS} connections, one server at a time, "
            f"{ROUNDS} rounds of {SECONDS:.0f} s)",
            f"{local_rps:,.0f} req/s",
            "-",
            None,
        ),
        row(
            f"GET {PATH} cached, limits in Redis (one EVALSHA per request to redis-server on 127.0.0.1)",
            f"{redis_rps:,.0f} req/s ({redis_rps / local_rps:.2f}x); errors {failures}; "
            f"{scripts:,} rate-limit scripts run in Redis"
            if scripts
            else "NO SCRIPT RAN IN REDIS",
            "-",
            None if scripts and failures == 0 else False,
        ),
        row(
            "the Redis round trip per limited request: server CPU (from throughput) and latency at 1 connection",
            f"{cost_us:+.0f} us CPU; p50 {p50['local']:.2f} ms in process vs {p50['redis']:.2f} ms in Redis "
            f"({(p50['redis'] - p50['local']) * 1000:+.0f} us)",
            "-",
            None,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
