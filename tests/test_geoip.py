"""GeoIP (docs/API.md#geoip) through the ASGI app, on .mmdb fixtures written by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.mmdb import city_record, reload_changed, write_city_db


async def test_full_record_with_asn_database(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.get("/ip/8.8.8.8")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "ip": "8.8.8.8",
        "country": "US",
        "city": "Mountain View",
        "region": "California",
        "timezone": "America/Los_Angeles",
        "latitude": 37.4223,
        "longitude": -122.085,
        "isp": "Google LLC",
        "asn": "AS15169",
        "org": "Google LLC",
        "network": "8.8.8.0/24",
    }


async def test_time_zone_derived_from_coordinates_when_database_has_none(settings: Settings) -> None:
    async with running_app(settings) as client:
        mountain_view = (await client.get("/ip/8.8.4.4")).json()["data"]
        chicago = (await client.get("/ip/12.0.1.1")).json()["data"]
    assert mountain_view["timezone"] == "America/Los_Angeles"
    assert chicago["timezone"] == "America/Chicago"
    assert chicago["city"] == "Chicago"


async def test_unknown_fields_are_null_never_invented(settings: Settings) -> None:
    async with running_app(settings.replace(geoip_asn_db=None)) as client:
        data = (await client.get("/ip/1.1.1.1")).json()["data"]
    assert data["country"] == "AU"
    for field in ("city", "region", "timezone", "latitude", "longitude"):
        assert data[field] is None, field


async def test_ipv6_and_canonical_forms(settings: Settings) -> None:
    async with running_app(settings) as client:
        upper = await client.get("/ip/" + "2001:4860:0:0:0:0:0:88aa".upper())
        mapped = await client.get("/ip/::ffff:8.8.8.8")
    assert upper.status_code == 200
    assert upper.json()["data"]["ip"] == "2001:4860::88aa"
    assert upper.json()["data"]["asn"] == "AS15169"
    assert mapped.status_code == 200
    assert mapped.json()["data"]["ip"] == "8.8.8.8"


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("10.0.0.1", "private range (RFC 1918)"),
        ("192.168.4.4", "private range (RFC 1918)"),
        ("127.0.0.1", "loopback"),
        ("100.64.1.1", "carrier-grade NAT"),
        ("169.254.1.1", "link-local"),
        ("192.0.2.1", "documentation"),
        ("224.0.0.1", "multicast"),
        ("0.1.2.3", "this network"),
        ("255.255.255.255", "limited broadcast"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd00::1", "unique local"),
        ("2001:db8::1", "documentation"),
        ("ff02::1", "multicast"),
        ("::ffff:10.1.1.1", "private range"),
    ],
)
async def test_non_global_addresses_are_reserved(settings: Settings, address: str, words: str) -> None:
    async with running_app(settings) as client:
        response = await client.get(f"/ip/{address}")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "reserved_address"
    assert words in error["message"]


@pytest.mark.parametrize(
    "text",
    ["abc", "8.8.8", "8.8.8.8.8", "256.1.1.1", "08.8.8.8", "fe80::1%25eth0", "1.2.3.4 ", "::g", "x" * 300, "-1"],
)
async def test_bad_addresses_are_invalid_ip(settings: Settings, text: str) -> None:
    async with running_app(settings) as client:
        response = await client.get(f"/ip/{text}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_ip"


async def test_public_address_missing_from_database(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.get("/ip/9.9.9.9")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "address_not_found"


async def test_no_database_is_503_and_not_ready(settings: Settings, tmp_path: Path) -> None:
    async with running_app(settings.replace(geoip_city_db=tmp_path / "missing.mmdb")) as client:
        lookup = await client.get("/ip/8.8.8.8")
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")
    assert lookup.status_code == 503
    assert lookup.json()["error"]["code"] == "geoip_unavailable"
    assert ready.status_code == 503
    assert alive.status_code == 200


async def test_corrupt_database_is_not_ready(settings: Settings, tmp_path: Path) -> None:
    broken = tmp_path / "broken.mmdb"
    broken.write_bytes(b"not a maxmind database" * 100)
    async with running_app(settings.replace(geoip_city_db=broken)) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert "city" in ready.json()["error"]["message"]


async def test_own_address_uses_the_socket_peer(settings: Settings) -> None:
    async with running_app(settings, client=("8.8.8.8", 5555)) as client:
        response = await client.get("/ip")
    assert response.status_code == 200
    assert response.json()["data"]["ip"] == "8.8.8.8"


async def test_own_address_reserved_when_called_from_loopback(settings: Settings) -> None:
    async with running_app(settings, client=("127.0.0.1", 5555)) as client:
        response = await client.get("/ip", headers={"X-Forwarded-For": "8.8.8.8"})
    # No trusted proxies configured: the forwarding header is ignored (docs/API.md#client-address).
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "reserved_address"


async def test_reload_swaps_database_in_place(settings: Settings, tmp_path: Path) -> None:
    path = write_city_db(tmp_path / "city.mmdb")
    async with running_app(settings.replace(geoip_city_db=path)) as client:
        before = (await client.get("/ip/8.8.8.8")).json()["data"]
        write_city_db(tmp_path / "next.mmdb", {"8.8.8.0/24": city_record(country="DE", city="Berlin")})
        (tmp_path / "next.mmdb").replace(path)
        reloaded = reload_changed(client.app.state.intel.databases)
        after = (await client.get("/ip/8.8.8.8")).json()["data"]
    assert before["country"] == "US"
    assert reloaded == ["city"]
    assert after["country"] == "DE" and after["city"] == "Berlin"


async def test_ipinfo_style_asn_database(settings: Settings, tmp_path: Path) -> None:
    from tests.support.mmdb import write_asn_db

    ipinfo = write_asn_db(tmp_path / "ipinfo.mmdb", {"8.8.8.0/24": {"asn": "AS15169", "as_name": "Google LLC"}})
    async with running_app(settings.replace(geoip_asn_db=ipinfo)) as client:
        data = (await client.get("/ip/8.8.8.8")).json()["data"]
    assert data["asn"] == "AS15169"
    assert data["org"] == "Google LLC"
