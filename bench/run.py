"""`make bench`: every benchmark figure in one report.

Each ``bench/bench_*.py`` module exposes ``main() -> list[row]``; this runs
them in a fixed order, prints one table and writes it, with the machine it
ran on, to ``bench/results.md``. Ratios are measured side by side in the same
run, never against numbers from another machine.

Usage: python bench/run.py [name ...]   (names: throughput cached blacklist batch vpn mcp latency ...)
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

ORDER = [
    "throughput",
    "cached",
    "redis",
    "workers",
    "latency",
    "blacklist",
    "batch",
    "batch_uncached",
    "vpn",
    "mcp",
    "startup",
]


def machine() -> str:
    try:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?"
        )
    except OSError:
        cpu = platform.processor() or "?"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    except OSError:
        wrk = "not installed (aiohttp load generator used)"
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; load generator: {wrk}"
    )


def main(argv: list[str]) -> int:
    names = argv or [n for n in ORDER if (HERE / f"bench_{n}.py").exists()]
    rows: list[dict[str, object]] = []
    failed = False
    for name in names:
        started = time.monotonic()
        print(f"== {name} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"bench_{name}")
            produced = module.main()
        except Exception:
            traceback.print_exc()
            produced = [{"figure": f"{name}: benchmark failed", "value": "error", "target": "-", "ok": False}]
        for r in produced:
            r.setdefault("bench", name)
        rows.extend(produced)
        print(f"   {name} took {time.monotonic() - started:.0f} s", file=sys.stderr)
    lines = [
        "| benchmark | figure | value | target | met |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        met = {True: "yes", False: "NO", None: "-"}[r.get("ok")]  # type: ignore[index]
        failed |= r.get("ok") is False
        lines.append(f"| {r['bench']} | {r['figure']} | {r['value']} | {r['target']} | {met} |")
    table = "\n".join(lines)
    print(table)
    report = (
        "# Benchmark results\n\n"
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC with `make bench` on: {machine()}.\n\n"
        f"{table}\n"
    )
    if not argv:  # only a full run replaces the committed report
        (HERE / "results.md").write_text(report, encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
