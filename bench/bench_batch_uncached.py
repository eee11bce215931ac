"""Issue 23: a batch of 1,000 distinct *uncached* addresses (include geo, vpn) on one worker, beside a bare
loop of the same database lookups over the same addresses.

The server is a real ipintel process (``IPINTEL_WORKERS=1``, pinned to one CPU, the default rate limits, the
feeds loaded) on the local fake internet, with the benchmark City database of bench_batch (3.0.0.0/8 in 256
city records) and no ASN database: the AS of an address is Team Cymru's, whose zone answers every address of
3.0.0.0/8 (bench_batch's DNS hook). Each round posts a batch of 1,000 addresses no request has named before
(:func:`bench_batch.fresh`: each in a /24 of its own, so no Team Cymru answer or cached verdict serves another)
and times it from the request to the last byte of the answer; the answer is then checked (200, one result
per address, no part in error). In a batch geo and vpn ask no upstream (docs/API.md#profile-and-batch), so
the figure is the service's own work: parsing, canonical addresses, the City lookup, the VPN sources in
memory, the cache, the JSON answer.

The bare loop is the same City database read with maxminddb (``get_with_prefix_len``, as the service reads
it) for the same 1,000 addresses, in the benchmark's process on the same CPU: what the lookups cost with
nothing around them. Target: at least 10,000 addresses per second; the ratio to the bare loop is reported.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import statistics
import sys
import time
from pathlib import Path

import maxminddb

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batch import _answers, batch_server, city_db, fresh
from common import SERVER_CPU

from tests.support.fake_internet import FakeInternet

BATCH = 1000
INCLUDE = ["geo", "vpn"]
ROUNDS = 15
TARGET = 10_000.0


def _one_batch(port: int, ips: list[str]) -> float:
    body = json.dumps({"ips": ips, "include": INCLUDE})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        started = time.perf_counter()
        conn.request("POST", "/ip/batch", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"batch answered {response.status}: {data[:300]!r}")
    results = json.loads(data)["data"]["results"]
    bad = [r for r in results if "data" not in r or any("error" in r["data"][part] for part in INCLUDE)]
    if len(results) != len(ips) or bad:
        raise RuntimeError(f"{len(results)} results for {len(ips)} addresses, {len(bad)} bad: {bad[:2]}")
    return elapsed


def _bare_loop(db: Path, ips: list[str]) -> float:
    """Seconds for the City lookups of ``ips``, the best of 5 passes (a fresh reader: nothing cached)."""
    best = float("inf")
    addresses = [ipaddress.ip_address(ip) for ip in ips]
    for _ in range(5):
        with maxminddb.open_database(str(db)) as reader:
            started = time.perf_counter()
            for address in addresses:
                reader.get_with_prefix_len(address)
            best = min(best, time.perf_counter() - started)
    return best


def main() -> list[dict[str, object]]:
    db = city_db()
    with contextlib.suppress(OSError, ValueError):
        os.sched_setaffinity(0, {int(SERVER_CPU)})  # the bare loop on the server's CPU
    rates: list[float] = []
    bare: list[float] = []
    with FakeInternet() as net:
        net.dns.hook(_answers)
        with batch_server(net, db, pin=True) as port:
            _one_batch(port, fresh(BATCH))  # warm-up: the time-zone finder, the first connections
            for _ in range(ROUNDS):
                ips = fresh(BATCH)
                rates.append(BATCH / _one_batch(port, ips))
                bare.append(BATCH / _bare_loop(db, ips))
    rate = statistics.median(rates)
    loop = statistics.median(bare)
    return [
        {
            "figure": (
                f"POST /ip/batch, 1,000 distinct uncached addresses (geo, vpn; no ASN database: Team Cymru), one "
                f"worker on one CPU, default limits (median of {ROUNDS} batches, each of fresh addresses)"
            ),
            "value": f"{rate:,.0f} addresses/s ({1000 * BATCH / rate:.0f} ms a batch; lowest {min(rates):,.0f}, highest {max(rates):,.0f})",
            "target": f">= {TARGET:,.0f} addresses/s",
            "ok": rate >= TARGET,
        },
        {
            "figure": "bare loop: the City .mmdb lookups (maxminddb) of the same addresses, same CPU (median of "
            "the best of 5 passes per batch)",
            "value": f"{loop:,.0f} lookups/s; the batch is {rate / loop:.2f}x the bare loop",
            "target": "-",
            "ok": None,
        },
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
