"""Issue 2: throughput of GET /ip/8.8.8.8 and GET /cidr next to a bare Starlette handler.

Every server runs on the same hypercorn configuration, and all of them are
loaded at the same time, sharing one CPU, ``ROUNDS`` times
(:func:`common.simultaneous`): on a small shared VM one run's throughput
differs from the next by ±20% with what the host is doing, which measured
one after the other swamps the differences this benchmark is about, while
at the same time it reaches every server alike. A figure is the median over
the rounds of the ratio within a round, with its lowest and highest. ``/ip``
and ``/cidr`` are loaded on two ipintel processes, so each has its own share.
A second baseline, the bare handler sending the five headers every ipintel
answer must carry (X-Request-Id and RateLimit-*), shows how much of the gap
those headers alone cost in hypercorn and h11. Without wrk the servers are
loaded one after the other instead (:func:`common.compare`), and the report
says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bare_server, compare, errors, ipintel_server, median_rps, paired_ratio, row, simultaneous

SECONDS = 3.0
ROUNDS = 5
TARGET = 0.85  # cached GET /ip and /cidr at 0.85x or more of the bare handler (the codebase issue)


def main() -> list[dict[str, object]]:
    with (
        bare_server(pin=True) as bare,
        bare_server(api_headers=True, pin=True) as bare_headers,
        ipintel_server(pin=True) as ours_ip,
        ipintel_server(pin=True) as ours_cidr,
    ):
        urls = {
            "bare": f"http://127.0.0.1:{bare}/ip/8.8.8.8",
            "bare+headers": f"http://127.0.0.1:{bare_headers}/ip/8.8.8.8",
            "ip": f"http://127.0.0.1:{ours_ip}/ip/8.8.8.8",
            "cidr": f"http://127.0.0.1:{ours_cidr}/cidr?range=10.0.0.0/8",
        }
        runs = simultaneous(urls, rounds=ROUNDS, seconds=SECONDS)
        how = f"all at once on one CPU, {ROUNDS} rounds of {SECONDS:.0f} s"
        if runs is None:
            runs = compare(urls, rounds=ROUNDS, seconds=SECONDS)
            how = f"one after the other (no wrk), {ROUNDS} rounds of {SECONDS:.0f} s"
    headers_ratio, headers_low, headers_high = paired_ratio(runs, "bare+headers", "bare")
    rows = [
        row(
            f"bare Starlette handler (baseline; {how})",
            f"{median_rps(runs['bare']):,.0f} req/s",
            "-",
            None,
        ),
        row(
            "bare handler + the 5 API headers (reference)",
            f"{median_rps(runs['bare+headers']):,.0f} req/s; "
            f"{headers_ratio:.2f}x ({headers_low:.2f}-{headers_high:.2f})",
            "-",
            None,
        ),
    ]
    for name, label in (("ip", "GET /ip/8.8.8.8"), ("cidr", "GET /cidr?range=10.0.0.0/8")):
        ratio, low, high = paired_ratio(runs, name, "bare")
        failed = errors(runs[name])
        rows.append(
            row(
                f"{label} throughput vs bare (median of the ratios within a round; lowest-highest)",
                f"{median_rps(runs[name]):,.0f} req/s; {ratio:.2f}x ({low:.2f}-{high:.2f}); "
                f"vs bare+headers {paired_ratio(runs, name, 'bare+headers')[0]:.2f}x; errors {failed}",
                f">= {TARGET:.2f}x",
                ratio >= TARGET and failed == 0,
            )
        )
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
