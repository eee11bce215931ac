"""Issue 2: throughput of GET /ip/8.8.8.8 and GET /cidr next to a bare Starlette handler."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bare_server, ipintel_server, load, row  # noqa: E402

SECONDS = 5.0


def main() -> list[dict[str, object]]:
    rows = []
    with bare_server() as port:
        load(f"http://127.0.0.1:{port}/ip/8.8.8.8", seconds=1)  # warm-up
        bare = load(f"http://127.0.0.1:{port}/ip/8.8.8.8", seconds=SECONDS)
    with ipintel_server() as port:
        load(f"http://127.0.0.1:{port}/ip/8.8.8.8", seconds=1)
        geo = load(f"http://127.0.0.1:{port}/ip/8.8.8.8", seconds=SECONDS)
        cidr = load(f"http://127.0.0.1:{port}/cidr?range=10.0.0.0/8", seconds=SECONDS)
    rows.append(row("bare Starlette handler (baseline)", f"{bare.requests_per_second:,.0f} req/s", "-", None))
    for name, result in (("GET /ip/8.8.8.8", geo), ("GET /cidr?range=10.0.0.0/8", cidr)):
        ratio = result.requests_per_second / bare.requests_per_second
        rows.append(
            row(
                f"{name} throughput vs bare",
                f"{result.requests_per_second:,.0f} req/s = {ratio:.2f}x (errors {result.errors})",
                ">= 0.80x",
                ratio >= 0.8 and result.errors == 0,
            )
        )
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
