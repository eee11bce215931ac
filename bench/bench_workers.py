"""Issue 16, "every core": two workers against one, and hypercorn's uvloop worker class against asyncio.

1. ``IPINTEL_WORKERS=2`` against ``IPINTEL_WORKERS=1`` on cached ``GET /ip/8.8.8.8``, with the load
   generator (wrk, one thread, 32 connections) on the same machine and nothing pinned: the point is
   to use every core. Both servers run side by side and are loaded one after the other, the order
   alternating, ``ROUNDS`` times (as :func:`common.compare` does); the figure is the median of the
   ratios within a round, next to the cores each server used (a machine busy with other work leaves
   two workers less than two cores, and the figure shows it). Rate limits are off on both: several workers with limits on need Redis
   (``IPINTEL_REDIS_URL``), which this benchmark does not run. On a 2-core machine the target is
   1.5x: wrk and the kernel's share of the loopback traffic take the rest.
2. The event loop: the same server (one worker, the settings of ``bench_cached``) on hypercorn's
   ``asyncio`` and ``uvloop`` worker classes, loaded at the same time on one shared CPU
   (:func:`common.simultaneous`), as the other throughput ratios are.

``python bench/bench_workers.py serve CLASS`` runs ipintel on that worker class (for part 2).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PIDS,
    ROOT,
    Load,
    compare,
    errors,
    ipintel_env,
    ipintel_server,
    load,
    median_rps,
    paired_ratio,
    row,
    server,
    simultaneous,
)

SECONDS = 5.0
ROUNDS = 5
CONNECTIONS = 32
TARGET = 1.5
LOOP_SECONDS = 3.0
LIMITS_OFF = {"IPINTEL_RATE_LIMITS": "off"}


def _loop_server(worker_class: str) -> contextlib.AbstractContextManager[int]:
    """ipintel on ``worker_class``, pinned, with the settings of :func:`common.ipintel_server`."""
    command = [sys.executable, str(ROOT / "bench" / "bench_workers.py"), "serve", worker_class]
    return server(command, ipintel_env(), pin=True)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of ``pid`` and of its live children (a supervisor's workers)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def workers_rows() -> list[dict[str, object]]:
    """Rounds as :func:`common.compare` runs them (the order alternating), with the cores each server
    used during its run: on a machine busy with something else, two workers cannot get two cores, and
    the figure says so instead of passing for a property of the service."""
    busy = os.getloadavg()[0]
    with (
        ipintel_server({**LIMITS_OFF, "IPINTEL_WORKERS": "1"}) as one,
        ipintel_server({**LIMITS_OFF, "IPINTEL_WORKERS": "2"}) as two,
    ):
        ports = {"one": one, "two": two}
        urls = {name: f"http://127.0.0.1:{port}/ip/8.8.8.8" for name, port in ports.items()}
        for url in urls.values():
            load(url, seconds=1, connections=CONNECTIONS)  # warm-up: caches, connections
        runs: dict[str, list[Load]] = {"one": [], "two": []}
        cores: dict[str, list[float]] = {"one": [], "two": []}
        for i in range(ROUNDS):
            for name in ("one", "two") if i % 2 == 0 else ("two", "one"):
                pid = PIDS[ports[name]]
                cpu, started = _cpu_seconds(pid), time.monotonic()
                runs[name].append(load(urls[name], seconds=SECONDS, connections=CONNECTIONS))
                cores[name].append((_cpu_seconds(pid) - cpu) / (time.monotonic() - started))
    ratio, low, high = paired_ratio(runs, "two", "one")
    failed = errors(runs["one"]) + errors(runs["two"])
    tool = runs["one"][0].tool
    used = {name: statistics.median(c) for name, c in cores.items()}
    return [
        row(
            f"GET /ip/8.8.8.8 cached, 1 worker (rate limits off; {tool}, {CONNECTIONS} connections, same machine, "
            f"{ROUNDS} rounds of {SECONDS:.0f} s, one after the other; load average before {busy:.1f})",
            f"{median_rps(runs['one']):,.0f} req/s on {used['one']:.2f} cores",
            "-",
            None,
        ),
        row(
            f"GET /ip/8.8.8.8 cached, IPINTEL_WORKERS=2 vs 1 on {os.cpu_count()} cores "
            "(median of the ratios within a round; lowest-highest)",
            f"{median_rps(runs['two']):,.0f} req/s on {used['two']:.2f} cores; {ratio:.2f}x ({low:.2f}-{high:.2f}); "
            f"errors {failed}",
            f">= {TARGET:.1f}x",
            ratio >= TARGET and failed == 0,
        ),
    ]


def loop_rows() -> list[dict[str, object]]:
    with _loop_server("asyncio") as plain, _loop_server("uvloop") as uv:
        urls = {"asyncio": f"http://127.0.0.1:{plain}/ip/8.8.8.8", "uvloop": f"http://127.0.0.1:{uv}/ip/8.8.8.8"}
        runs = simultaneous(urls, rounds=ROUNDS, seconds=LOOP_SECONDS)
        how = f"all at once on one CPU, {ROUNDS} rounds of {LOOP_SECONDS:.0f} s"
        if runs is None:
            runs = compare(urls, rounds=ROUNDS, seconds=LOOP_SECONDS)
            how = f"one after the other (no wrk), {ROUNDS} rounds of {LOOP_SECONDS:.0f} s"
    ratio, low, high = paired_ratio(runs, "uvloop", "asyncio")
    from ipintel.__main__ import hypercorn_config

    adopted = hypercorn_config("127.0.0.1", 0).worker_class
    return [
        row(
            f"GET /ip/8.8.8.8 cached on hypercorn's asyncio worker class ({how})",
            f"{median_rps(runs['asyncio']):,.0f} req/s (errors {errors(runs['asyncio'])})",
            "-",
            None,
        ),
        row(
            f"the same on the uvloop worker class vs asyncio (median of the ratios within a round; lowest-highest); "
            f"the service runs on {adopted}",
            f"{median_rps(runs['uvloop']):,.0f} req/s; {ratio:.2f}x ({low:.2f}-{high:.2f}); "
            f"errors {errors(runs['uvloop'])}",
            "-",
            None,
        ),
    ]


def main() -> list[dict[str, object]]:
    return workers_rows() + loop_rows()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        sys.path.insert(0, str(ROOT))
        from ipintel.__main__ import main as serve

        raise SystemExit(serve([], worker_class=sys.argv[2]))
    for r in main():
        print(r)
