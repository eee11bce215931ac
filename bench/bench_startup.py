"""Issues 9 and 22: cold start to ready, and resident memory, with the default City and ASN databases.

Cold start: from spawning ``python -m ipintel`` to the first 200 from
``/readyz`` (median of three), with the City database alone and with the City
and ASN databases (target: under 3 s; the ASN file's AS -> networks index is
built in the background after the start). RSS: VmRSS of the server at ready,
once the ASN index is built (what the databases add: the index, and the
memory-mapped pages read), and after a mixed warm-up over every route, with the
default City database (DB-IP City Lite, ~100 MB, memory-mapped: only the pages
read count).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from common import ROOT, asn_db, city_db, free_port, row

from tests.support.fake_internet import ARIN_IP, LISTED_IP, FakeInternet


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start(env: dict[str, str]) -> tuple[subprocess.Popen, int, float]:
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("IPINTEL_")}
    full.update(env, IPINTEL_PORT=str(port), IPINTEL_HOST="127.0.0.1", IPINTEL_LOG_LEVEL="WARNING")
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ipintel"], cwd=ROOT, env=full,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = began + 60
    while time.perf_counter() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5).status_code == 200:
                return proc, port, time.perf_counter() - began
        except httpx.TransportError:
            pass
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("the server did not become ready")


def settled_rss(pid: int, timeout: float = 180.0) -> float:
    """RSS once it has not grown for 3 s (the ASN index, built in the background, is done)."""
    last, since, deadline = rss_mib(pid), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline and time.monotonic() - since < 3:
        time.sleep(0.25)
        now = rss_mib(pid)
        if now > last + 0.5:
            last, since = now, time.monotonic()
    return rss_mib(pid)


def cold_starts(env: dict[str, str], data_dir: str, label: str) -> list[float]:
    """Three first boots: an empty data directory each, nothing to load but the databases."""
    times = []
    for i in range(3):
        proc, _port, seconds = start({**env, "IPINTEL_DATA_DIR": str(Path(data_dir) / f"{label}-{i}")})
        times.append(seconds)
        stop(proc)
    return times


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> list[dict[str, object]]:
    database = city_db()
    # A data directory of its own: the fake internet's feed snapshots must never land in ./data.
    with FakeInternet() as net, tempfile.TemporaryDirectory(prefix="ipintel-bench-") as data_dir:
        env = {**net.env, "IPINTEL_GEOIP_CITY_DB": str(database), "IPINTEL_DATA_DIR": data_dir,
               "IPINTEL_RATE_LIMITS": "general=1000000,dns=1000000,registry=1000000"}  # fmt: skip
        times = cold_starts(env, data_dir, "city")
        asn = asn_db()
        with_asn = {**env, "IPINTEL_GEOIP_ASN_DB": str(asn)} if asn else None
        asn_times = cold_starts(with_asn, data_dir, "asn") if with_asn else []
        proc, _port, _ = start(env)
        try:
            city_only = settled_rss(proc.pid)
        finally:
            stop(proc)
        proc, port, _ = start(with_asn or env)
        try:
            idle = rss_mib(proc.pid)
            indexed = settled_rss(proc.pid)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                for i in range(2000):
                    a, b = i % 223 + 1, (i * 7) % 256
                    client.get(f"/ip/{a}.{b}.1.1")
                    client.get(f"/ip/{a}.{b}.1.1/vpn")
                    if i % 10 == 0:
                        client.get("/dns/example.com?type=MX")
                        client.get(f"/whois/{ARIN_IP}")
                        client.get(f"/blacklist/{LISTED_IP}")
                        client.get(f"/cidr?range=10.{b}.0.0/16")
            warm = rss_mib(proc.pid)
        finally:
            stop(proc)
    return [
        row(
            f"cold start to ready ({database.name}, median of 3)",
            f"{statistics.median(times) * 1000:.0f} ms",
            "-",
            None,
        ),
        *(
            [
                row(
                    f"cold start to ready ({database.name} + {asn.name}, median of 3)",
                    f"{statistics.median(asn_times) * 1000:.0f} ms",
                    "< 3000 ms",
                    statistics.median(asn_times) < 3,
                ),
                row(f"RSS idle, {database.name} alone", f"{city_only:.0f} MiB", "-", None),
                row(f"RSS at ready, + {asn.name} (its index still building)", f"{idle:.0f} MiB", "-", None),
                row(f"RSS idle, + {asn.name} indexed (what the ASN database adds)", f"{indexed:.0f} MiB", "-", None),
            ]
            if asn
            else [
                row(
                    "RSS at ready, idle (no ASN database: data/dbip-asn-lite.mmdb not fetched)",
                    f"{idle:.0f} MiB",
                    "-",
                    None,
                )
            ]
        ),
        row(
            "RSS after warm-up (4,000 GeoIP/VPN lookups of distinct addresses + every route)",
            f"{warm:.0f} MiB",
            "-",
            None,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
