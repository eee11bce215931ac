"""Every record layout the service reads, on real files (tests/support/real_databases.py), and every refusal.

Layouts (ipintel/capabilities/layouts.py): MaxMind's published test databases (GeoIP2/GeoLite2 City,
Country, ASN, ISP, Anonymous-IP, Connection-Type), DB-IP City Lite as DB-IP publishes it, ip-location-db's
flat City and Country files (IPv4 and IPv6 apart); IPinfo Lite and IPinfo's older country_asn file are written
here from IPinfo's sample records (no registry carries one). Refusals (ipintel/infra/mmdb.py): a file of the wrong kind, MaxMind's corrupt test files, a
truncated real file; at start (exit 2) and on reload (the old file stays).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ipintel import addresses
from ipintel.capabilities.layouts import NEEDS
from ipintel.capabilities.vpn import AnonymousIpSource, ConnectionTypeSource
from ipintel.geodata import mmdb_writer
from ipintel.infra.mmdb import MmdbFile
from ipintel.settings import Settings
from tests.support.app import ROOT, running_app, settings_env
from tests.support.mmdb import reload_changed
from tests.support.real_databases import CACHE, real_database


def maxmind(name: str) -> Path:
    return real_database("maxmind", f"test-data/{name}.mmdb")


def ip_location_db(name: str) -> Path:
    kind = "city" if "city" in name else "country"
    return real_database(f"ip-location-db-{kind}", f"{name}.mmdb")


# IPinfo's layouts, as its sample databases hold them (ipinfo/sample-database, 2026-08: `IPinfo Lite/` and
# `IP to Country ASN/`). No package registry carries an IPinfo file and files of other repositories are not
# committed here, so these two are written by the test, record for record as in IPinfo's samples.
IPINFO_SAMPLES: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    "ipinfo_lite_sample": (
        "ipinfo bundle_location_lite_sample.mmdb",
        {
            "1.0.0.0/24": {
                "as_domain": "cloudflare.com",
                "as_name": "Cloudflare, Inc.",
                "asn": "AS13335",
                "continent": "Oceania",
                "continent_code": "OC",
                "country": "Australia",
                "country_code": "AU",
            },
            "1.0.1.0/24": {"continent": "Asia", "continent_code": "AS", "country": "China", "country_code": "CN"},
            "1.7.3.0/24": {
                "as_domain": "sify.net",
                "as_name": "Sify Limited",
                "asn": "AS9583",
                "continent": "Asia",
                "continent_code": "AS",
                "country": "India",
                "country_code": "IN",
            },
        },
    ),
    "ipinfo_country_asn_sample": (
        "ipinfo generic_country_free_country_asn_sample.mmdb",
        {
            "1.0.0.0/24": {
                "as_domain": "cloudflare.com",
                "as_name": "Cloudflare, Inc.",
                "asn": "AS13335",
                "continent": "OC",
                "continent_name": "Oceania",
                "country": "AU",
                "country_name": "Australia",
            },
            "1.2.3.0/24": {
                "as_domain": "",
                "as_name": "",
                "asn": "",
                "continent": "EU",
                "continent_name": "Europe",
                "country": "UA",
                "country_name": "Ukraine",
            },
        },
    ),
}


def ipinfo(name: str) -> Path:
    database_type, networks = IPINFO_SAMPLES[name]
    path = Path(tempfile.mkdtemp(prefix="ipinfo-")) / f"{name}.mmdb"
    mmdb_writer.write(
        path,
        ((ipaddress.ip_network(cidr), record) for cidr, record in networks.items()),
        database_type=database_type,
        description="IPinfo's sample layout",
    )
    return path


async def lookup(settings: Settings, address: str) -> dict[str, object]:
    async with running_app(settings) as client:
        ready = await client.get("/readyz")
        response = await client.get(f"/ip/{address}")
    assert ready.status_code == 200, ready.text
    assert response.status_code == 200, response.text
    data: dict[str, object] = response.json()["data"]
    return data


# Layouts ----------------------------------------------------------------------------------------------


async def test_maxmind_geoip2_city(settings: Settings) -> None:
    data = await lookup(settings.replace(geoip_city_db=maxmind("GeoIP2-City-Test"), geoip_asn_db=None), "81.2.69.142")
    assert (data["country"], data["city"], data["region"], data["timezone"]) == (
        "GB",
        "London",
        "England",
        "Europe/London",
    )
    assert (data["latitude"], data["longitude"], data["network"]) == (51.5142, -0.0931, "81.2.69.142/31")


async def test_maxmind_geolite2_city(settings: Settings) -> None:
    data = await lookup(settings.replace(geoip_city_db=maxmind("GeoLite2-City-Test"), geoip_asn_db=None), "81.2.69.142")
    assert (data["country"], data["city"], data["timezone"]) == ("GB", "London", "Europe/London")


@pytest.mark.parametrize("name", ["GeoIP2-Country-Test", "GeoLite2-Country-Test"])
async def test_a_country_database_as_the_city_one_answers_the_country_alone(settings: Settings, name: str) -> None:
    data = await lookup(settings.replace(geoip_city_db=maxmind(name), geoip_asn_db=None), "81.2.69.142")
    assert data["country"] == "GB"
    assert (data["city"], data["region"], data["latitude"], data["longitude"], data["timezone"]) == (None,) * 5


async def test_maxmind_geolite2_asn_beside_an_ip_location_db_country_file(settings: Settings) -> None:
    both = settings.replace(geoip_city_db=ip_location_db("dbip-country"), geoip_asn_db=maxmind("GeoLite2-ASN-Test"))
    v4 = await lookup(both, "1.128.0.1")
    v6 = await lookup(both, "2600:6000::1")
    assert (v4["country"], v4["asn"], v4["org"], v4["isp"]) == ("AU", "AS1221", "Telstra Pty Ltd", "Telstra Pty Ltd")
    assert (v6["country"], v6["asn"], v6["org"]) == ("US", "AS237", "Merit Network Inc.")


async def test_maxmind_geoip2_isp_names_the_isp_apart(settings: Settings) -> None:
    data = await lookup(
        settings.replace(geoip_city_db=ip_location_db("dbip-country"), geoip_asn_db=maxmind("GeoIP2-ISP-Test")),
        "1.128.0.1",
    )
    assert (data["asn"], data["org"], data["isp"]) == ("AS1221", "Telstra Pty Ltd", "Telstra Internet")


async def test_maxmind_anonymous_ip_and_connection_type() -> None:
    anonymous = MmdbFile(maxmind("GeoIP2-Anonymous-IP-Test"), kind="anonymous", check=NEEDS["anonymous"])
    connection = MmdbFile(maxmind("GeoIP2-Connection-Type-Test"), kind="connection", check=NEEDS["connection"])
    assert anonymous.load() and connection.load()
    vpn = await AnonymousIpSource(anonymous).signals(addresses.parse_ip("1.2.0.1"))
    mobile = await ConnectionTypeSource(connection).signals(addresses.parse_ip("1.0.1.1"))
    assert [signal.reason for signal in vpn] == ["anonymous-db:vpn"]
    assert [signal.reason for signal in mobile] == ["connection-type:cellular"]


async def test_dbip_city_lite_as_dbip_publishes_it(settings: Settings) -> None:
    """The real DB-IP City Lite (April 2023): MaxMind's layout without a time zone, derived instead."""
    path = real_database("dbip-lite", "dbip-city-lite-latest.mmdb")
    data = await lookup(settings.replace(geoip_city_db=path, geoip_asn_db=None), "8.8.8.8")
    assert (data["country"], data["city"], data["region"]) == ("US", "Mountain View", "California")
    assert (data["latitude"], data["longitude"], data["timezone"]) == (37.4223, -122.085, "America/Los_Angeles")


async def test_ip_location_db_city_flat_layout_ipv4_and_ipv6_files(settings: Settings) -> None:
    """ip-location-db's flat City layout, IPv4 and IPv6 in two files of one setting: each address is
    answered by the file that has it (the IPv4 file cannot even be asked an IPv6 address)."""
    files = (ip_location_db("dbip-city-ipv4"), ip_location_db("dbip-city-ipv6"))
    v4 = await lookup(settings.replace(geoip_city_db=files, geoip_asn_db=None), "8.8.8.8")
    v6 = await lookup(settings.replace(geoip_city_db=files, geoip_asn_db=None), "2001:4860:4860::8888")
    assert (v4["country"], v4["city"], v4["region"], v4["timezone"]) == (
        "US",
        "Mountain View",
        "California",
        "America/Los_Angeles",  # the file's timezone is empty: derived from the coordinates
    )
    assert v4["latitude"] == pytest.approx(37.422, abs=1e-3)
    assert v6["country"] is not None and v6["city"] is not None and v6["latitude"] is not None


async def test_ip_location_db_country_files(settings: Settings) -> None:
    apart = (ip_location_db("dbip-country-ipv4"), ip_location_db("dbip-country-ipv6"))
    for files in (apart, ip_location_db("dbip-country")):
        data = await lookup(settings.replace(geoip_city_db=files, geoip_asn_db=None), "2001:4860:4860::8888")
        assert data["country"] is not None and data["city"] is None
        assert (await lookup(settings.replace(geoip_city_db=files), "8.8.8.8"))["country"] == "US"


async def test_the_first_file_with_a_record_answers(settings: Settings) -> None:
    country, city = maxmind("GeoIP2-Country-Test"), maxmind("GeoIP2-City-Test")
    first_country = await lookup(settings.replace(geoip_city_db=(country, city)), "81.2.69.142")
    first_city = await lookup(settings.replace(geoip_city_db=(city, country)), "81.2.69.142")
    assert (first_country["country"], first_country["city"]) == ("GB", None)
    assert (first_city["country"], first_city["city"]) == ("GB", "London")
    # An address only the second file has is answered by it.
    only_country = await lookup(settings.replace(geoip_city_db=(city, country)), "50.114.0.1")
    assert only_country["country"] == "US"


async def test_ipinfo_lite_serves_as_country_and_as_source(settings: Settings) -> None:
    """IPinfo's own sample of its Lite file (country and AS in one record), as both databases."""
    path = ipinfo("ipinfo_lite_sample")
    data = await lookup(settings.replace(geoip_city_db=path, geoip_asn_db=path), "1.0.0.1")
    assert (data["country"], data["asn"], data["org"], data["city"]) == ("AU", "AS13335", "Cloudflare, Inc.", None)


async def test_ipinfo_lite_alone_gives_the_as_from_its_own_record(settings: Settings) -> None:
    """No AS database configured: the City record's AS is used, not Team Cymru (whose DNS here is a closed
    port, so an answer proves no query was needed)."""
    data = await lookup(settings.replace(geoip_city_db=ipinfo("ipinfo_lite_sample"), geoip_asn_db=None), "1.7.3.1")
    assert (data["country"], data["asn"], data["org"]) == ("IN", "AS9583", "Sify Limited")


async def test_ipinfo_country_asn_older_layout(settings: Settings) -> None:
    path = ipinfo("ipinfo_country_asn_sample")
    with_as = await lookup(settings.replace(geoip_city_db=path, geoip_asn_db=path), "1.0.0.1")
    without = await lookup(settings.replace(geoip_city_db=path, geoip_asn_db=path), "1.2.3.4")
    assert (with_as["country"], with_as["asn"], with_as["org"]) == ("AU", "AS13335", "Cloudflare, Inc.")
    assert (without["country"], without["asn"]) == ("UA", None)  # "asn": "" in the file: no AS, not AS0


# Refusals ---------------------------------------------------------------------------------------------

WRONG_KIND = [
    ("city", "GeoLite2-ASN-Test", "a country, city or location"),
    ("city", "GeoIP2-Anonymous-IP-Test", "a country, city or location"),
    ("asn", "GeoIP2-City-Test", "an AS number"),
    ("asn", "GeoLite2-Country-Test", "an AS number"),
    ("anonymous", "GeoIP2-Connection-Type-Test", "is_anonymous_vpn"),
    ("connection", "GeoIP2-Anonymous-IP-Test", "connection_type"),
]


@pytest.mark.parametrize(("kind", "name", "missing"), WRONG_KIND)
def test_a_file_giving_no_field_its_kind_needs_is_refused(kind: str, name: str, missing: str) -> None:
    db = MmdbFile(maxmind(name), kind=kind, check=NEEDS[kind])
    assert not db.load() and not db.loaded
    assert db.last_error is not None
    assert f"database_type {name.removesuffix('-Test')!r}" in db.last_error and missing in db.last_error


def corrupt_files() -> list[str]:
    """MaxMind's corrupt test files (MaxMind-DB's bad-data and the broken ones of its test-data)."""
    names = ["GeoIP2-City-Test-Broken-Double-Format", "GeoIP2-City-Test-Invalid-Node-Count"]
    names += ["MaxMind-DB-test-broken-pointers-24", "MaxMind-DB-test-broken-search-tree-24"]
    found = [f"test-data/{name}.mmdb" for name in names]
    found += sorted(str(p.relative_to(CACHE / "maxmind")) for p in (CACHE / "maxmind" / "bad-data").rglob("*.mmdb"))
    return found


@pytest.mark.parametrize("name", corrupt_files())
def test_a_corrupt_file_is_refused(name: str) -> None:
    db = MmdbFile(real_database("maxmind", name), kind="city", check=NEEDS["city"])
    assert not db.load() and not db.loaded
    assert db.last_error and (
        "corrupt" in db.last_error or "does not open" in db.last_error or "gives" in db.last_error
    )


def truncated(tmp_path: Path, source: Path, fraction: float = 0.5) -> Path:
    data = source.read_bytes()
    path = tmp_path / f"truncated-{source.name}"
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def test_a_truncated_real_file_is_refused(tmp_path: Path) -> None:
    db = MmdbFile(truncated(tmp_path, ip_location_db("dbip-country-ipv4")), kind="city", check=NEEDS["city"])
    assert not db.load()
    assert db.last_error and "does not open as a MaxMind DB file" in db.last_error


def run_server(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m ipintel`` as an operator starts it; it must stop by itself (a refusal)."""
    base = {
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_PORT": "9",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
    }
    return subprocess.run(
        [sys.executable, "-m", "ipintel"],
        cwd=ROOT,
        env=settings_env({**base, **env}),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_start_refuses_a_file_of_the_wrong_layout_with_exit_2() -> None:
    path = maxmind("GeoLite2-ASN-Test")
    result = run_server({"IPINTEL_GEOIP_CITY_DB": str(path)})
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and "'GeoLite2-ASN'" in result.stderr
    assert "gives a country, city or location" in result.stderr


def test_start_refuses_a_truncated_file_among_several_with_exit_2(tmp_path: Path) -> None:
    bad = truncated(tmp_path, ip_location_db("dbip-country-ipv6"))
    result = run_server({"IPINTEL_GEOIP_CITY_DB": f"{ip_location_db('dbip-country-ipv4')}, {bad}"})
    assert result.returncode == 2, result.stderr
    assert f"the city database {bad}" in result.stderr and "does not open" in result.stderr


def test_start_refuses_a_corrupt_asn_file_with_exit_2() -> None:
    broken = maxmind("MaxMind-DB-test-broken-pointers-24")
    result = run_server(
        {"IPINTEL_GEOIP_CITY_DB": str(maxmind("GeoIP2-City-Test")), "IPINTEL_GEOIP_ASN_DB": str(broken)}
    )
    assert result.returncode == 2, result.stderr
    assert f"the asn database {broken}" in result.stderr and "corrupt data" in result.stderr


@pytest.mark.parametrize("replacement", ["wrong-kind", "truncated"])
async def test_a_refused_replacement_keeps_the_old_file(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture, replacement: str
) -> None:
    path = tmp_path / "city.mmdb"
    path.write_bytes(ip_location_db("dbip-country-ipv4").read_bytes())
    async with running_app(settings.replace(geoip_city_db=path, geoip_asn_db=None)) as client:
        new = maxmind("GeoLite2-ASN-Test").read_bytes()
        if replacement == "truncated":
            new = path.read_bytes()[:100_000]
        (tmp_path / "next.mmdb").write_bytes(new)
        (tmp_path / "next.mmdb").replace(path)
        with caplog.at_level(logging.ERROR, logger="ipintel.mmdb"):
            assert reload_changed(client.app.state.intel.databases) == []
        answer = await client.get("/ip/8.8.8.8")
        ready = await client.get("/readyz")
    assert answer.status_code == 200 and answer.json()["data"]["country"] == "US"
    check = ready.json()["data"]["checks"]["geoip_city"]
    # The old file still serves ("stale" rather than "ok" once it is 60 days old), the refusal beside it.
    assert ready.status_code == 200 and check["status"] in ("ok", "stale") and check["databaseType"] == "country ipv4"
    assert "gives a country" in check["error"] or "does not open" in check["error"]
    assert any("refused the city database" in r.message and "previous file stays" in r.message for r in caplog.records)


# Default paths ----------------------------------------------------------------------------------------


async def test_default_files_only_those_present_and_one_appearing_later(settings: Settings, tmp_path: Path) -> None:
    """Unset settings: <data_dir>/dbip-city-lite.mmdb and dbip-city-lite-ipv6.mmdb for the City data,
    dbip-asn-lite.mmdb for the AS; only the files there are used, and one fetched later is picked up."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    os.symlink(ip_location_db("dbip-country-ipv4"), data_dir / "dbip-city-lite.mmdb")
    defaults = settings.replace(data_dir=data_dir, geoip_city_db=None, geoip_asn_db=None)
    async with running_app(defaults) as client:
        ready = await client.get("/readyz")
        v6_before = await client.get("/ip/2001:4860:4860::8888")
        os.symlink(ip_location_db("dbip-country-ipv6"), data_dir / "dbip-city-lite-ipv6.mmdb")
        os.symlink(maxmind("GeoLite2-ASN-Test"), data_dir / "dbip-asn-lite.mmdb")
        assert sorted(reload_changed(client.app.state.intel.databases)) == ["asn", "city"]
        v6_after = await client.get("/ip/2001:4860:4860::8888")
        as_after = await client.get("/ip/1.128.0.1")
    checks = ready.json()["data"]["checks"]
    assert ready.status_code == 200
    assert checks["geoip_city"]["status"] in ("ok", "stale") and checks["geoip_city_2"]["status"] == "absent"
    assert checks["geoip_asn"]["status"] == "absent"
    assert v6_before.status_code == 404 and v6_after.json()["data"]["country"] == "CA"  # DB-IP places it in Canada
    assert as_after.json()["data"]["asn"] == "AS1221"


async def test_no_default_file_is_not_ready(settings: Settings, tmp_path: Path) -> None:
    async with running_app(settings.replace(data_dir=tmp_path / "empty", geoip_city_db=None)) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503


def test_settings_take_a_comma_separated_list_per_kind() -> None:
    env = {"IPINTEL_GEOIP_CITY_DB": "/db/v4.mmdb, /db/v6.mmdb", "IPINTEL_GEOIP_ASN_DB": "/db/asn.mmdb"}
    settings = Settings.from_env(env)
    assert settings.city_db_paths == (Path("/db/v4.mmdb"), Path("/db/v6.mmdb"))
    assert settings.asn_db_paths == (Path("/db/asn.mmdb"),)
    assert settings.default_db_kinds == frozenset()
    defaults = Settings.from_env({"IPINTEL_DATA_DIR": "/d"})
    assert defaults.city_db_paths == (Path("/d/dbip-city-lite.mmdb"), Path("/d/dbip-city-lite-ipv6.mmdb"))
    assert defaults.asn_db_paths == (Path("/d/dbip-asn-lite.mmdb"),)
    assert defaults.default_db_kinds == {"city", "asn"}
