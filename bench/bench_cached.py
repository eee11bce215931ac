"""Issue 6: the cached path with rate limits on costs little next to a bare handler.

``GET /ip/8.8.8.8`` against a real ipintel process (hypercorn, the default
middleware stack: request id and access log, rate limiting with limits far
above what the run can reach, the GeoIP cache answering every request after
the first) and against a bare Starlette handler on the same hypercorn
configuration (``bench/bare_app.py``), all loaded at the same time on one
CPU (see ``bench_throughput.py``). The figure is the throughput ratio, the
median over rounds of the ratio within a round; the target is at least 0.8. A third server with
limits off shows what the limiter itself costs. Every request must succeed:
a 429 would mean the limit was reached and the run measured the wrong path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bare_server, compare, errors, ipintel_server, median_rps, paired_ratio, row, simultaneous

SECONDS = 3.0
ROUNDS = 5
CONNECTIONS = 32
PATH = "/ip/8.8.8.8"
# The highest limits IPINTEL_RATE_LIMITS accepts: 1,000,000 per minute holds
# far more than these runs can send from one client, so no request is refused.
HIGH_LIMITS = "general=1000000,dns=1000000,registry=1000000"
TARGET = 0.85  # cached GET /ip and /cidr at 0.85x or more of the bare handler (the codebase issue)


def main() -> list[dict[str, object]]:
    with (
        bare_server(pin=True) as bare_port,
        ipintel_server({"IPINTEL_RATE_LIMITS": HIGH_LIMITS}, pin=True) as limited_port,
        ipintel_server({"IPINTEL_RATE_LIMITS": "off"}, pin=True) as unlimited_port,
    ):
        urls = {
            "bare": f"http://127.0.0.1:{bare_port}{PATH}",
            "limited": f"http://127.0.0.1:{limited_port}{PATH}",
            "unlimited": f"http://127.0.0.1:{unlimited_port}{PATH}",
        }
        runs = simultaneous(urls, rounds=ROUNDS, seconds=SECONDS, connections=CONNECTIONS)
        how = f"all at once on one CPU, {ROUNDS} rounds of {SECONDS:.0f} s"
        if runs is None:
            runs = compare(urls, rounds=ROUNDS, seconds=SECONDS, connections=CONNECTIONS)
            how = f"one after the other, {ROUNDS} rounds of {SECONDS:.0f} s"
    tool = runs["bare"][0].tool
    ratio, low, high = paired_ratio(runs, "limited", "bare")
    limiter_cost = 1 - paired_ratio(runs, "limited", "unlimited")[0]
    return [
        row(
            f"bare Starlette handler {PATH} (baseline, {tool}, {CONNECTIONS} connections, {how})",
            f"{median_rps(runs['bare']):,.0f} req/s (errors {errors(runs['bare'])})",
            "-",
            None,
        ),
        row(
            f"GET {PATH} cached, rate limits on, vs bare (median of the ratios within a round; lowest-highest)",
            f"{median_rps(runs['limited']):,.0f} req/s; {ratio:.2f}x ({low:.2f}-{high:.2f}); "
            f"errors {errors(runs['limited'])}",
            f">= {TARGET:.2f}x",
            ratio >= TARGET and errors(runs["limited"]) == 0 and errors(runs["bare"]) == 0,
        ),
        row(
            f"GET {PATH} cached, rate limits off (the limiter costs {limiter_cost:.1%} of it)",
            f"{median_rps(runs['unlimited']):,.0f} req/s (errors {errors(runs['unlimited'])})",
            "-",
            None,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
