"""Issue 6: the cached path with rate limits on costs little next to a bare handler.

``GET /ip/8.8.8.8`` against a real ipintel process (hypercorn, the default
middleware stack: request id and access log, rate limiting with limits far
above what the run can reach, the GeoIP cache answering every request after
the first) and against a bare Starlette handler on the same hypercorn
configuration (``bench/bare_app.py``). The figure is the throughput ratio;
the target is at least 0.8. A third run with limits off shows what the
limiter itself costs. Every request must succeed: a 429 would mean the limit
was reached and the run measured the wrong path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bare_server, ipintel_server, load, row

SECONDS = 5.0
CONNECTIONS = 32
PATH = "/ip/8.8.8.8"
# The highest limits IPINTEL_RATE_LIMITS accepts: 1,000,000 per minute holds
# far more than a 5 s run can send from one client, so no request is refused.
HIGH_LIMITS = "general=1000000,dns=1000000,registry=1000000"
TARGET = 0.8


def _measure(port: int) -> tuple[float, int, str]:
    url = f"http://127.0.0.1:{port}{PATH}"
    load(url, seconds=1, connections=CONNECTIONS)  # warm-up: fills the cache, opens connections
    result = load(url, seconds=SECONDS, connections=CONNECTIONS)
    return result.requests_per_second, result.errors, result.tool


def main() -> list[dict[str, object]]:
    with bare_server() as port:
        bare, bare_errors, tool = _measure(port)
    with ipintel_server({"IPINTEL_RATE_LIMITS": HIGH_LIMITS}) as port:
        limited, limited_errors, _ = _measure(port)
    with ipintel_server({"IPINTEL_RATE_LIMITS": "off"}) as port:
        unlimited, unlimited_errors, _ = _measure(port)

    ratio = limited / bare if bare else 0.0
    limiter_cost = 1 - limited / unlimited if unlimited else 0.0
    return [
        row(
            f"bare Starlette handler {PATH} (baseline, {tool}, {CONNECTIONS} connections)",
            f"{bare:,.0f} req/s (errors {bare_errors})",
            "-",
            None,
        ),
        row(
            f"GET {PATH} cached, rate limits on, vs bare",
            f"{limited:,.0f} req/s = {ratio:.2f}x (errors {limited_errors})",
            f">= {TARGET:.2f}x",
            ratio >= TARGET and limited_errors == 0 and bare_errors == 0,
        ),
        row(
            f"GET {PATH} cached, rate limits off (limiter cost {limiter_cost:+.1%})",
            f"{unlimited:,.0f} req/s (errors {unlimited_errors})",
            "-",
            None,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
