"""Issue 2: throughput of GET /ip/8.8.8.8 and GET /cidr next to a bare Starlette handler.

All servers run side by side on the same hypercorn configuration and are
loaded in turn, ``ROUNDS`` times, each keeping its best run, so that a noisy
neighbour on a small machine does not favour whichever ran first. A second
baseline, the bare handler sending the five headers every ipintel answer must
carry (X-Request-Id and RateLimit-*), shows how much of the gap those headers
alone cost in hypercorn and h11.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bare_server, ipintel_server, load, row

SECONDS = 3.0
ROUNDS = 3
TARGET = 0.8


def main() -> list[dict[str, object]]:
    best: dict[str, float] = {}
    errors: dict[str, int] = {}
    with (
        bare_server() as bare,
        bare_server(spec_headers=True) as bare_headers,
        ipintel_server() as ours,
    ):
        urls = {
            "bare": f"http://127.0.0.1:{bare}/ip/8.8.8.8",
            "bare+headers": f"http://127.0.0.1:{bare_headers}/ip/8.8.8.8",
            "ip": f"http://127.0.0.1:{ours}/ip/8.8.8.8",
            "cidr": f"http://127.0.0.1:{ours}/cidr?range=10.0.0.0/8",
        }
        for url in urls.values():
            load(url, seconds=1)  # warm-up: caches, connections
        for _ in range(ROUNDS):
            for name, url in urls.items():
                result = load(url, seconds=SECONDS)
                best[name] = max(best.get(name, 0.0), result.requests_per_second)
                errors[name] = errors.get(name, 0) + result.errors
    base = best["bare"]
    rows = [
        row(f"bare Starlette handler (baseline, best of {ROUNDS})", f"{base:,.0f} req/s", "-", None),
        row(
            "bare handler + the 5 SPEC headers (reference)",
            f"{best['bare+headers']:,.0f} req/s = {best['bare+headers'] / base:.2f}x",
            "-",
            None,
        ),
    ]
    for name, label in (("ip", "GET /ip/8.8.8.8"), ("cidr", "GET /cidr?range=10.0.0.0/8")):
        ratio = best[name] / base
        rows.append(
            row(
                f"{label} throughput vs bare",
                f"{best[name]:,.0f} req/s = {ratio:.2f}x (vs bare+headers {best[name] / best['bare+headers']:.2f}x; "
                f"errors {errors[name]})",
                f">= {TARGET:.2f}x",
                ratio >= TARGET and errors[name] == 0,
            )
        )
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
