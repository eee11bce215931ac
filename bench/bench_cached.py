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

SECONDS = 3.0
ROUNDS = 3
CONNECTIONS = 32
PATH = "/ip/8.8.8.8"
# The highest limits IPINTEL_RATE_LIMITS accepts: 1,000,000 per minute holds
# far more than these runs can send from one client, so no request is refused.
HIGH_LIMITS = "general=1000000,dns=1000000,registry=1000000"
TARGET = 0.8


def main() -> list[dict[str, object]]:
    """The three servers run side by side and are loaded in turn, ``ROUNDS`` times;
    each keeps its best run. Interleaving and best-of keep a noisy neighbour on
    a small machine from favouring whichever variant happened to run first."""
    best: dict[str, float] = {"bare": 0.0, "limited": 0.0, "unlimited": 0.0}
    errors: dict[str, int] = dict.fromkeys(best, 0)
    tool = "?"
    with (
        bare_server() as bare_port,
        ipintel_server({"IPINTEL_RATE_LIMITS": HIGH_LIMITS}) as limited_port,
        ipintel_server({"IPINTEL_RATE_LIMITS": "off"}) as unlimited_port,
    ):
        ports = {"bare": bare_port, "limited": limited_port, "unlimited": unlimited_port}
        for port in ports.values():  # warm-up: fills the caches, opens connections
            load(f"http://127.0.0.1:{port}{PATH}", seconds=1, connections=CONNECTIONS)
        for _ in range(ROUNDS):
            for name, port in ports.items():
                result = load(f"http://127.0.0.1:{port}{PATH}", seconds=SECONDS, connections=CONNECTIONS)
                best[name] = max(best[name], result.requests_per_second)
                errors[name] += result.errors
                tool = result.tool

    bare, limited, unlimited = best["bare"], best["limited"], best["unlimited"]
    ratio = limited / bare if bare else 0.0
    limiter_cost = 1 - limited / unlimited if unlimited else 0.0
    return [
        row(
            f"bare Starlette handler {PATH} (baseline, {tool}, {CONNECTIONS} connections, best of {ROUNDS})",
            f"{bare:,.0f} req/s (errors {errors['bare']})",
            "-",
            None,
        ),
        row(
            f"GET {PATH} cached, rate limits on, vs bare",
            f"{limited:,.0f} req/s = {ratio:.2f}x (errors {errors['limited']})",
            f">= {TARGET:.2f}x",
            ratio >= TARGET and errors["limited"] == 0 and errors["bare"] == 0,
        ),
        row(
            f"GET {PATH} cached, rate limits off (the limiter costs {limiter_cost:.1%} of it)",
            f"{unlimited:,.0f} req/s (errors {errors['unlimited']})",
            "-",
            None,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
