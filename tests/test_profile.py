"""The profile and the batch (docs/API.md#profile-and-batch): ``GET /ip/{ip}/profile`` and ``POST /ip/batch``.

Through the ASGI app (``running_app``: every answer is validated against its route's schema) and, for the
main cases, the real server process (``server_process``, same validation), with the local fake internet
(tests/support/fake_internet.py) as every upstream: the DNS server (reverse zones, DNSBL zones), the RDAP
registries and their IANA bootstrap, the reputation API. Faults are switched on in those upstreams, never
in our code; upstream requests are counted where they are received.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ipintel.infra.limiter import Quota
from ipintel.settings import Settings
from tests.support.app import running_app, server_process, validate_response
from tests.support.fake_internet import ARIN_NETWORK, LISTED_IP, RIPE_IP, RIPE_NETWORK, FakeInternet
from tests.support.mmdb import ASN_NETWORKS, CITY_NETWORKS, city_record, write_asn_db, write_city_db
from tests.support.rdap_server import REGISTRIES, RdapServer, Reply, bootstrap_document, rdap_fixture

pytestmark = pytest.mark.usefixtures("healthy_net")  # tests switch faults on: off again after each

PARTS = ["geo", "vpn", "whois", "blacklist", "ptr"]
V6 = "2600:1f14::1"  # ARIN's IPv6 space in the fake internet
V6_NETWORK = rdap_fixture("arin_v6")

# The fixture GeoIP world plus ARIN's 3.0.0.0/9, RIPE's 193.0.0.0/21 and an ARIN IPv6 prefix, so that every part
# of a profile of those addresses has an answer.
CITY = {
    **CITY_NETWORKS,
    "3.0.0.0/9": city_record(
        country="US",
        city="Ashburn",
        region="Virginia",
        latitude=39.0438,
        longitude=-77.4874,
        time_zone="America/New_York",
    ),
    "193.0.0.0/21": city_record(country="NL", city="Amsterdam", region="North Holland", latitude=52.37, longitude=4.89),
    "45.33.32.0/24": city_record(country="US", city="Fremont", region="California", latitude=37.55, longitude=-121.98),
    "2600:1f14::/35": city_record(country="US", city="Boardman", region="Oregon", latitude=45.84, longitude=-119.7),
}
AMAZON = {"autonomous_system_number": 16509, "autonomous_system_organization": "Amazon.com, Inc."}
ASN = {**ASN_NETWORKS, "3.0.0.0/9": AMAZON, "2600:1f14::/35": AMAZON}

# Addresses no earlier test has looked up, so that the module's server process has nothing cached for them.
_FRESH = (f"3.{a}.{b}.{c}" for a in range(100, 128) for b in range(256) for c in range(1, 255))


def arin_address(net: FakeInternet, *, ptr: bool = True) -> str:
    """A fresh address in ARIN's 3.0.0.0/9 that every upstream knows: a GeoIP record, an RDAP answer and
    (``ptr``) a PTR record."""
    ip = next(_FRESH)
    if ptr:
        net.dns.add_ptr(ip, ptr_name(ip), ttl=60)
    set_rdap(net, "arin", ip, Reply.json(ARIN_NETWORK))
    return ip


def ptr_name(ip: str) -> str:
    return f"host-{ip.replace('.', '-').replace(':', '-')}.example.net"


def set_rdap(net: FakeInternet, registry: str, ip: str, reply: Reply) -> None:
    def apply() -> None:
        assert net.rdap is not None
        net.rdap.set(net.rdap.ip_path(registry, ip), reply)

    net.call(apply)


def rdap_hits(net: FakeInternet, registry: str, ip: str) -> int:
    def read() -> int:
        assert net.rdap is not None
        return net.rdap.hits[net.rdap.ip_path(registry, ip)]

    return int(net.call(read))


def without_ttl(part: dict[str, Any]) -> dict[str, Any]:
    """A PTR answer without its TTLs, which count down while an answer is cached."""
    if "records" not in part:
        return part
    return {**part, "records": [{k: v for k, v in r.items() if k != "ttl"} for r in part["records"]]}


# Where the tests run: the ASGI app, and the real server process --------------------------------------------------


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("profile-mmdb")
    return write_city_db(tmp / "city.mmdb", CITY), write_asn_db(tmp / "asn.mmdb", ASN)


@pytest.fixture
def net_settings(settings: Settings, net: FakeInternet, dbs: tuple[Path, Path]) -> Settings:
    """The test settings (no rate limits, feeds off) with every upstream on the fake internet."""
    city, asn = dbs
    return net.settings(settings.replace(geoip_city_db=city, geoip_asn_db=asn))


def server_env(net: FakeInternet, dbs: tuple[Path, Path], data_dir: Path, **extra: str) -> dict[str, str]:
    city, asn = dbs
    return {
        **net.env,
        "IPINTEL_GEOIP_CITY_DB": str(city),
        "IPINTEL_GEOIP_ASN_DB": str(asn),
        "IPINTEL_DATA_DIR": str(data_dir),
        "IPINTEL_FEEDS": "off",
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_LOG_LEVEL": "ERROR",
        **extra,
    }


@pytest.fixture(scope="module")
def server(net: FakeInternet, dbs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m ipintel`` on the fake internet, one per module; its base URL."""
    with server_process(server_env(net, dbs, tmp_path_factory.mktemp("profile-data"))) as (client, _proc):
        yield str(client.base_url).rstrip("/")


async def _validated(response: httpx.Response) -> None:
    await response.aread()
    validate_response(response)  # the route's schema (or the error schema), as running_app's client does


@contextlib.asynccontextmanager
async def process_client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An async client of a server process whose every answer is validated like ``running_app``'s."""
    async with httpx.AsyncClient(base_url=base_url, event_hooks={"response": [_validated]}, timeout=30) as client:
        yield client


# The server is asked for by the process case alone, so that the ASGI case is a unit test (tests/support/kinds.py).
@pytest.fixture(params=["asgi", pytest.param("process", marks=pytest.mark.process)])
async def client(request: pytest.FixtureRequest, net_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The ASGI app (fresh caches) or the module's server process (caches shared by the module's tests)."""
    if request.param == "asgi":
        async with running_app(net_settings) as asgi:
            yield asgi
    else:
        async with process_client(request.getfixturevalue("server")) as process:
            yield process


async def batch(client: httpx.AsyncClient, ips: list[str], include: list[str] | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"ips": ips} if include is None else {"ips": ips, "include": include}
    response = await client.post("/ip/batch", json=body)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["data"]["results"]
    return results


async def profile(client: httpx.AsyncClient, ip: str, include: str | None = None) -> dict[str, Any]:
    response = await client.get(f"/ip/{ip}/profile", params={"include": include} if include is not None else None)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def single_routes(client: httpx.AsyncClient, ip: str) -> dict[str, Any]:
    """What each part's own route answers for ``ip``: its data, or its error object."""
    paths = {
        "geo": f"/ip/{ip}",
        "vpn": f"/ip/{ip}/vpn",
        "whois": f"/whois/{ip}",
        "blacklist": f"/blacklist/{ip}",
        "ptr": f"/dns/{ip}/reverse",
    }
    answers = {}
    for part, path in paths.items():
        body = (await client.get(path)).json()
        answers[part] = body.get("data", body)
    return answers


# A profile with every part good ----------------------------------------------------------------------------------


async def test_every_part_is_what_its_own_route_answers(net: FakeInternet, net_settings: Settings) -> None:
    """The profile (of an app with empty caches) against the five single routes (of another): the same
    objects, each part a success."""
    ip = arin_address(net)
    async with running_app(net_settings) as first:
        data = await profile(first, ip)
    async with running_app(net_settings) as second:
        singles = await single_routes(second, ip)
    assert list(data) == ["ip", *PARTS]
    assert data["ip"] == ip
    for part in PARTS:
        assert "error" not in data[part], (part, data[part])
        assert without_ttl(data[part]) == without_ttl(singles[part]), part
    assert data["geo"]["city"] == "Ashburn" and data["geo"]["asn"] == "AS16509"
    assert data["whois"]["handle"] == ARIN_NETWORK["handle"] and data["whois"]["registry"] == "ARIN"
    assert data["blacklist"]["status"] == "clear"
    assert [r["data"] for r in data["ptr"]["records"]] == [ptr_name(ip)]


async def test_a_profile_on_the_real_server_shares_the_routes_caches(net: FakeInternet, server: str) -> None:
    """On the server process: every part good, equal to the single routes asked afterwards, which answer from
    the entries the profile left (the registry is not asked again)."""
    ip = arin_address(net)
    async with process_client(server) as client:
        started = time.perf_counter()
        data = await profile(client, ip)
        elapsed = time.perf_counter() - started
        assert rdap_hits(net, "arin", ip) == 1
        singles = await single_routes(client, ip)
    assert rdap_hits(net, "arin", ip) == 1, "the whois route answered from the profile's cache entry"
    assert {part: without_ttl(data[part]) for part in PARTS} == {part: without_ttl(singles[part]) for part in PARTS}
    assert all("error" not in data[part] for part in PARTS), data
    assert elapsed < 20  # a bound on a hang, not a measurement (each part answered: no timeout was waited for)


async def test_a_listed_address_is_listed_in_its_profile(client: httpx.AsyncClient) -> None:
    data = await profile(client, LISTED_IP, "blacklist,geo")
    assert list(data) == ["ip", "geo", "blacklist"]
    assert data["blacklist"]["status"] == "listed" and data["blacklist"]["listed"] is True
    assert data["geo"]["city"] == "Fremont"


async def test_the_parts_are_asked_at_once(net: FakeInternet, net_settings: Settings) -> None:
    """The registry and the reputation source 1 s late, DNS 0.2 s: the profile costs about the slowest part, not
    the sum of the parts. One after another, whois and blacklist alone would take 2 s: under 2 s they overlapped,
    however loaded the machine (the timeouts raised well past the delays; DNS cannot wait longer than its 0.25 s
    first try)."""
    ip = arin_address(net)
    set_rdap(net, "arin", ip, Reply.json(ARIN_NETWORK, delay=1.0))
    net.reputation_slow(1.0)
    net.dns_slow(0.2)
    patient = net_settings.replace(upstream_timeout=5.0, blacklist_deadline=5.0)
    async with running_app(patient) as client:
        await client.get("/whois/3.0.0.1")  # the bootstrap files, fetched once per process
        started = time.perf_counter()
        data = await profile(client, ip)
        elapsed = time.perf_counter() - started
    assert all("error" not in data[part] for part in PARTS), data
    assert elapsed < 2.0, f"{elapsed:.2f} s: the parts were not asked concurrently"


# Each part failing alone -------------------------------------------------------------------------------------------


def assert_good(data: dict[str, Any], ip: str, *, but: set[str]) -> None:
    """Every part but ``but`` is the success the healthy fake internet gives for ``arin_address(ip)``."""
    good = {
        "geo": lambda part: part["city"] == "Ashburn",
        "vpn": lambda part: part["ip"] == ip and part["isHosting"] is True,
        "whois": lambda part: part["handle"] == ARIN_NETWORK["handle"],
        "blacklist": lambda part: part["status"] == "clear",
        "ptr": lambda part: [r["data"] for r in part["records"]] == [ptr_name(ip)],
    }
    for part, check in good.items():
        if part not in but:
            assert "error" not in data[part] and check(data[part]), (part, data[part])


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply.server_error(503), "upstream_error"),
        (Reply.dropped(), "upstream_error"),
        (Reply.invalid_json(), "upstream_error"),
        (Reply.slow(3.0, ARIN_NETWORK), "upstream_timeout"),
    ],
    ids=["503", "dropped", "garbage", "slow"],
)
async def test_a_registry_fault_is_the_whois_part_alone(
    net: FakeInternet, client: httpx.AsyncClient, reply: Reply, code: str
) -> None:
    ip = arin_address(net)
    set_rdap(net, "arin", ip, reply)
    response = await client.get(f"/ip/{ip}/profile")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["whois"]["error"]["code"] == code, data["whois"]
    assert_good(data, ip, but={"whois"})


async def test_a_reverse_dns_fault_is_the_ptr_part_alone(net: FakeInternet, client: httpx.AsyncClient) -> None:
    ip = arin_address(net)
    net.dns.servfail("in-addr.arpa")
    data = await profile(client, ip)
    assert data["ptr"]["error"]["code"] == "upstream_error", data["ptr"]
    assert_good(data, ip, but={"ptr"})


async def test_failing_blacklists_are_the_blacklist_part_alone(net: FakeInternet, client: httpx.AsyncClient) -> None:
    """A DNSBL or reputation source that fails is ``unavailable`` inside the check (docs/API.md#blacklist),
    never an error of the profile: the check is ``unknown`` and the other parts are untouched."""
    ip = arin_address(net)
    net.dns.servfail("healthy.test")
    net.dns.servfail("second.test")
    net.apply("reputation_down")
    data = await profile(client, ip)
    assert data["blacklist"]["status"] == "unknown", data["blacklist"]
    assert {s["status"] for s in data["blacklist"]["sources"]} == {"unavailable"}
    assert_good(data, ip, but={"blacklist"})


async def test_no_geoip_database_is_the_geo_part_alone(
    net: FakeInternet, net_settings: Settings, tmp_path: Path
) -> None:
    ip = arin_address(net)
    async with running_app(net_settings.replace(geoip_city_db=tmp_path / "missing.mmdb")) as client:
        data = await profile(client, ip)
    assert data["geo"]["error"]["code"] == "geoip_unavailable"
    assert_good(data, ip, but={"geo"})


async def test_every_upstream_down_still_answers_a_profile(net: FakeInternet, client: httpx.AsyncClient) -> None:
    ip = arin_address(net)
    net.apply("dns_down", "reputation_down")
    set_rdap(net, "arin", ip, Reply.dropped())
    response = await client.get(f"/ip/{ip}/profile")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["whois"]["error"]["code"] == "upstream_error"
    assert data["ptr"]["error"]["code"] in ("upstream_timeout", "upstream_error")
    assert data["blacklist"]["status"] == "unknown"
    assert_good(data, ip, but={"whois", "ptr", "blacklist"})


async def test_an_ipv6_profile_has_no_blacklist_check(net: FakeInternet, client: httpx.AsyncClient) -> None:
    net.dns.add_ptr(V6, ptr_name(V6), ttl=60)
    set_rdap(net, "arin", V6, Reply.json(V6_NETWORK))
    data = await profile(client, V6)
    assert data["ip"] == V6
    assert data["blacklist"]["error"]["code"] == "ipv6_not_supported"
    assert data["geo"]["city"] == "Boardman"
    assert data["whois"]["registry"] == "ARIN" and "error" not in data["whois"]
    assert [r["data"] for r in data["ptr"]["records"]] == [ptr_name(V6)]
    assert data["vpn"]["ip"] == V6 and data["vpn"]["isHosting"] is True


async def test_an_ipv4_mapped_address_is_profiled_as_its_ipv4_address(client: httpx.AsyncClient) -> None:
    mapped = await profile(client, "::ffff:193.0.6.139", "geo,whois")
    assert mapped["ip"] == RIPE_IP
    assert mapped["geo"]["ip"] == RIPE_IP and mapped["geo"]["city"] == "Amsterdam"
    assert mapped["whois"]["registry"] == "RIPE NCC" and mapped["whois"]["handle"] == RIPE_NETWORK["handle"]


# The address and the selection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "status", "code"),
    [
        ("10.0.0.1", 422, "reserved_address"),
        ("127.0.0.1", 422, "reserved_address"),
        ("::1", 422, "reserved_address"),
        ("::ffff:192.168.1.1", 422, "reserved_address"),
        ("100.64.0.1", 422, "reserved_address"),
        ("8.8.8", 400, "invalid_ip"),
        ("not-an-ip", 400, "invalid_ip"),
        ("fe80::1%25eth0", 400, "invalid_ip"),
        ("1" * 5000, 400, "invalid_ip"),
    ],
)
async def test_a_bad_or_reserved_address_fails_the_whole_profile(
    client: httpx.AsyncClient, ip: str, status: int, code: str
) -> None:
    for query in ("", "?include=geo"):
        response = await client.get(f"/ip/{ip}/profile{query}")
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code
        assert len(response.content) < 1024
    if code == "reserved_address":
        assert ip.removeprefix("::ffff:") in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("include", "parts"),
    [
        ("geo", ["geo"]),
        ("whois,geo", ["geo", "whois"]),
        ("ptr,blacklist,vpn", ["vpn", "blacklist", "ptr"]),
        ("geo,geo,vpn", ["geo", "vpn"]),
        ("ptr,whois,blacklist,vpn,geo", PARTS),
    ],
)
async def test_include_selects_the_parts_in_profile_order(
    net_settings: Settings, include: str, parts: list[str]
) -> None:
    async with running_app(net_settings) as client:
        data = await profile(client, "8.8.8.8", include)
    assert list(data) == ["ip", *parts]


@pytest.mark.parametrize("include", ["", "nope", "geo,nope", "geo,", "GEO", "geo vpn", "," * 3, "x" * 5000])
async def test_an_unknown_or_empty_selection_is_invalid_request(client: httpx.AsyncClient, include: str) -> None:
    response = await client.get("/ip/8.8.8.8/profile", params={"include": include})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "geo, vpn, whois, blacklist, ptr" in error["message"] and len(error["message"]) < 200


# Batches ---------------------------------------------------------------------------------------------------------


async def test_a_mixed_batch_keeps_order_and_looks_each_address_up_once(
    net: FakeInternet, client: httpx.AsyncClient
) -> None:
    ip = arin_address(net)
    mapped = f"::ffff:{ip}"
    given = ["8.8.8.8", "bad", ip, "10.0.0.1", mapped, "::ffff:8.8.8.8", "", V6, "fe80::1%eth0", "::1", ip]
    results = await batch(client, given, ["geo", "vpn", "whois"])
    assert [entry["ip"] for entry in results] == given  # as given, in order
    assert [sorted(entry) for entry in results] == [
        ["data", "ip"] if text in ("8.8.8.8", ip, mapped, "::ffff:8.8.8.8", V6) else ["error", "ip"] for text in given
    ]
    errors = {entry["ip"]: entry["error"]["code"] for entry in results if "error" in entry}
    assert errors == {
        "bad": "invalid_ip",
        "10.0.0.1": "reserved_address",
        "": "invalid_ip",
        "fe80::1%eth0": "invalid_ip",
        "::1": "reserved_address",
    }
    by_text = {entry["ip"]: entry.get("data") for entry in results}
    # An address given three times in two spellings: one lookup, one registry request, the same result each time.
    assert results[2]["data"] == results[4]["data"] == results[10]["data"]
    assert results[2]["data"]["ip"] == ip and results[2]["data"]["whois"]["handle"] == ARIN_NETWORK["handle"]
    assert rdap_hits(net, "arin", ip) == 1
    assert by_text["8.8.8.8"] == by_text["::ffff:8.8.8.8"]
    assert by_text["8.8.8.8"]["geo"]["city"] == "Mountain View"  # type: ignore[index]
    assert by_text["8.8.8.8"]["whois"]["error"]["code"] == "registration_not_found"  # type: ignore[index]
    assert [part for part in by_text[V6] if part != "notConsulted"] == ["ip", "geo", "vpn", "whois"]  # type: ignore[union-attr]


async def test_a_batch_entry_is_the_profile_of_its_address(net: FakeInternet, client: httpx.AsyncClient) -> None:
    ip = arin_address(net)
    (entry,) = await batch(client, [ip], PARTS)
    alone = await profile(client, ip)
    # Every part but the verdict: a batch's verdict is local (issue 23), and says what it left out.
    local = {k: without_ttl(v) if isinstance(v, dict) else v for k, v in entry["data"].items()}
    assert local.pop("notConsulted", ["ptr"]) == ["ptr"]
    assert {k: v for k, v in local.items() if k != "vpn"} == {
        k: without_ttl(v) if isinstance(v, dict) else v for k, v in alone.items() if k != "vpn"
    }
    if "unchecked:ptr" in local["vpn"]["reasons"]:
        assert [r for r in local["vpn"]["reasons"] if r != "unchecked:ptr"] == [
            r for r in alone["vpn"]["reasons"] if not r.startswith("ptr:")
        ]


async def test_a_batch_looks_up_geo_and_vpn_unless_told(client: httpx.AsyncClient) -> None:
    results = await batch(client, ["8.8.8.8", "81.2.69.142"])
    assert [[k for k in entry["data"] if k != "notConsulted"] for entry in results] == [["ip", "geo", "vpn"]] * 2
    assert results[1]["data"]["geo"]["city"] == "London"
    assert await batch(client, []) == []


async def test_a_thousand_addresses_pass_and_the_next_is_refused(client: httpx.AsyncClient) -> None:
    ips = [f"8.{i // 250}.{i % 250}.1" for i in range(1000)]
    started = time.perf_counter()
    results = await batch(client, ips)
    elapsed = time.perf_counter() - started
    assert [entry["ip"] for entry in results] == ips
    assert all("data" in entry for entry in results)
    assert elapsed < 60  # a bound on something serial or quadratic, not a measurement

    response = await client.post("/ip/batch", json={"ips": [*ips, "8.8.8.8"]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "1000" in error["message"] and "1001" in error["message"] and "IPINTEL_BATCH_MAX" in error["message"]


async def test_the_batch_limit_is_configurable(net_settings: Settings) -> None:
    async with running_app(net_settings.replace(batch_max=3)) as client:
        assert len(await batch(client, ["8.8.8.8", "bad", "10.0.0.1"])) == 3
        over = await client.post("/ip/batch", json={"ips": ["8.8.8.8"] * 4})
        document = (await client.get("/openapi.json")).json()
    assert over.status_code == 400 and over.json()["error"]["code"] == "invalid_request"
    assert "at most 3" in over.json()["error"]["message"]
    assert document["components"]["schemas"]["ip_batch_request"]["properties"]["ips"]["maxItems"] == 3


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "not valid JSON"),
        (b"not json", "not valid JSON"),
        (b'{"ips": ["8.8.8.8"]', "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b'["8.8.8.8"]', "must be an object"),
        (b'"8.8.8.8"', "must be an object"),
        (b"null", "must be an object"),
        (b"{}", "ips must be a list"),
        (b'{"ips": "8.8.8.8"}', "ips must be a list"),
        (b'{"ips": null}', "ips must be a list"),
        (b'{"ips": [1, 2]}', "ips must be a list"),
        (b'{"ips": ["8.8.8.8", null]}', "ips must be a list"),
        (b'{"ips": [["8.8.8.8"]]}', "ips must be a list"),
        (b'{"ips": {"0": "8.8.8.8"}}', "ips must be a list"),
        (b'{"ips": ["8.8.8.8"], "extra": 1}', "unexpected member 'extra'"),
        (b'{"ip": "8.8.8.8"}', "unexpected member 'ip'"),
        (b'{"ips": ["8.8.8.8"], "include": "geo"}', "include must be a list"),
        (b'{"ips": ["8.8.8.8"], "include": null}', "include must be a list"),
        (b'{"ips": ["8.8.8.8"], "include": {"geo": true}}', "include must be a list"),
        (b'{"ips": ["8.8.8.8"], "include": []}', "include must be a list of one or more parts (geo, vpn"),
        (
            b'{"ips": ["8.8.8.8"], "include": ["geo", "nope"]}',
            "'include[1]' must be one of geo, vpn, whois, blacklist, ptr, not 'nope'",
        ),
        (b'{"ips": ["8.8.8.8"], "include": ["geo", 1]}', "'include[1]' must be a string, not a number"),
        (b'{"ips": ["8.8.8.8"], "include": [["geo"]]}', "'include[0]' must be a string, not an array"),
    ],
)
async def test_a_body_of_the_wrong_shape_is_invalid_request(client: httpx.AsyncClient, body: bytes, said: str) -> None:
    response = await client.post("/ip/batch", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and said in error["message"], error


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx"])
async def test_a_body_that_is_not_json_by_its_type_is_415(client: httpx.AsyncClient, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post("/ip/batch", content=b'{"ips": ["8.8.8.8"]}', headers=headers)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


async def test_json_with_parameters_and_any_case_is_json(client: httpx.AsyncClient) -> None:
    for content_type in ("application/json; charset=utf-8", "Application/JSON"):
        response = await client.post(
            "/ip/batch", content=b'{"ips": ["8.8.8.8"]}', headers={"Content-Type": content_type}
        )
        assert response.status_code == 200, response.text


async def test_a_body_over_the_limit_is_413(net_settings: Settings) -> None:
    limit = 2048
    body = json.dumps({"ips": ["8.8.8.8"] * 300}).encode()  # 3.3 kB
    assert len(body) > limit

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts what arrives
        for start in range(0, len(body), 500):
            yield body[start : start + 500]

    async with running_app(net_settings.replace(max_body_bytes=limit)) as client:
        declared = await client.post("/ip/batch", content=body, headers={"Content-Type": "application/json"})
        streamed = await client.post("/ip/batch", content=chunked(), headers={"Content-Type": "application/json"})
        under = await client.post("/ip/batch", json={"ips": ["8.8.8.8"] * 100})
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        assert "IPINTEL_MAX_BODY_BYTES" in response.json()["error"]["message"]
    assert under.status_code == 200


async def test_a_body_over_the_limit_on_the_real_server(
    net: FakeInternet, dbs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The server process answers 413 (and the connection stays usable) for a body over IPINTEL_MAX_BODY_BYTES."""
    env = server_env(net, dbs, tmp_path, IPINTEL_MAX_BODY_BYTES="4096")
    with server_process(env) as (client, proc):
        big = client.post("/ip/batch", json={"ips": ["8.8.8.8"] * 1000})
        after = client.post("/ip/batch", json={"ips": ["8.8.8.8"]})
        assert proc.poll() is None
    assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"
    assert after.status_code == 200 and after.json()["data"]["results"][0]["data"]["geo"]["city"] == "Mountain View"


# Rate limits (docs/API.md#profile-and-batch, "Rate limits of both") ------------------------------------------------


def limits(general: int, dns: int, registry: int) -> dict[Quota, int]:
    return {Quota.GENERAL: general, Quota.DNS: dns, Quota.REGISTRY: registry}


def code_of(part: dict[str, Any]) -> str | None:
    return part.get("error", {}).get("code") if isinstance(part.get("error"), dict) else None


async def test_a_profile_spends_a_token_per_part_that_asks_an_upstream(
    net: FakeInternet, net_settings: Settings
) -> None:
    """general 10, dns 1, registry 3: the first profile spends 2 registry tokens (whois, blacklist) and the
    dns token (ptr); the second has one registry token left, for its whois. The headers are the general
    scope's, which each request spends once; the single routes then find their buckets empty."""
    first_ip, second_ip = arin_address(net), arin_address(net)
    async with running_app(net_settings.replace(rate_limits=limits(10, 1, 3))) as client:
        first = await client.get(f"/ip/{first_ip}/profile")
        second = await client.get(f"/ip/{second_ip}/profile")
        local = await client.get(f"/ip/{second_ip}/profile", params={"include": "geo,vpn"})
        whois = await client.get(f"/whois/{first_ip}")
        reverse = await client.get(f"/dns/{first_ip}/reverse")
        cidr = await client.get("/cidr", params={"range": "10.0.0.0/8"})
    answers = (first, second, local)
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert [r.headers["ratelimit-limit"] for r in answers] == ["10", "10", "10"]
    assert [r.headers["ratelimit-remaining"] for r in answers] == ["9", "8", "7"]
    assert all(r.headers["ratelimit-policy"] == "10;w=60" for r in answers)

    a, b = first.json()["data"], second.json()["data"]
    assert {part: code_of(a[part]) for part in PARTS} == dict.fromkeys(PARTS)
    assert {part: code_of(b[part]) for part in PARTS} == {
        "geo": None,
        "vpn": None,
        "whois": None,
        "blacklist": "rate_limited",
        "ptr": "rate_limited",
    }
    assert "registry" in b["blacklist"]["error"]["message"] and "dns" in b["ptr"]["error"]["message"]
    assert local.json()["data"]["geo"]["city"] == "Ashburn"  # geo and vpn spend nothing
    assert whois.status_code == 429 and whois.headers["ratelimit-limit"] == "3"
    assert reverse.status_code == 429 and reverse.headers["ratelimit-limit"] == "1"
    assert cidr.status_code == 200 and cidr.headers["ratelimit-remaining"] == "6"


async def test_a_batch_spends_per_unique_address_and_runs_out_in_place(
    net: FakeInternet, net_settings: Settings
) -> None:
    """registry 3: the whois parts of the first three addresses (a duplicate spends nothing more) are
    answered, the later ones are ``rate_limited`` in place while their geo and vpn are answered."""
    ips = [arin_address(net) for _ in range(5)]
    given = [ips[0], "bad", ips[1], f"::ffff:{ips[0]}", ips[2], "10.0.0.1", ips[3], ips[4]]
    async with running_app(net_settings.replace(rate_limits=limits(5, 30, 3))) as client:
        response = await client.post("/ip/batch", json={"ips": given, "include": ["geo", "vpn", "whois"]})
        local = await client.post("/ip/batch", json={"ips": [f"8.8.{i}.1" for i in range(200)]})
        whois = await client.get(f"/whois/{ips[0]}")
    assert response.status_code == 200 and local.status_code == 200
    assert [r.headers["ratelimit-remaining"] for r in (response, local)] == ["4", "3"]
    assert response.headers["ratelimit-limit"] == "5"
    entries = response.json()["data"]["results"]
    assert [e["ip"] for e in entries] == given
    profiles = [e["data"] for e in entries if "data" in e]
    assert [code_of(p["whois"]) for p in profiles] == [None, None, None, None, "rate_limited", "rate_limited"]
    assert all(p["geo"]["city"] == "Ashburn" and "error" not in p["vpn"] for p in profiles)
    assert whois.status_code == 429 and whois.json()["error"]["code"] == "rate_limited"


async def test_every_upstream_part_of_a_batch_spends_its_own_scope(net: FakeInternet, net_settings: Settings) -> None:
    """registry 5 and dns 2 over four addresses, all parts: whois and blacklist share the registry scope
    (address by address), ptr has the dns scope to itself."""
    ips = [arin_address(net) for _ in range(4)]
    async with running_app(net_settings.replace(rate_limits=limits(60, 2, 5))) as client:
        entries = await batch(client, ips, PARTS)
    codes = {part: [code_of(e["data"][part]) for e in entries] for part in PARTS}
    assert codes == {
        "geo": [None] * 4,
        "vpn": [None] * 4,
        "whois": [None, None, None, "rate_limited"],
        "blacklist": [None, None, "rate_limited", "rate_limited"],
        "ptr": [None, None, "rate_limited", "rate_limited"],
    }


async def test_rate_limits_of_a_batch_on_the_real_server(
    net: FakeInternet, dbs: tuple[Path, Path], tmp_path: Path
) -> None:
    ips = [arin_address(net) for _ in range(3)]
    env = server_env(net, dbs, tmp_path, IPINTEL_RATE_LIMITS="general=5,dns=1,registry=2")
    with server_process(env) as (client, _proc):
        response = client.post("/ip/batch", json={"ips": [*ips, ips[0]], "include": ["geo", "whois", "ptr"]})
        profile = client.get(f"/ip/{ips[0]}/profile")
        whois = client.get(f"/whois/{ips[0]}")
    assert response.status_code == 200
    assert (response.headers["ratelimit-limit"], response.headers["ratelimit-remaining"]) == ("5", "4")
    entries = response.json()["data"]["results"]
    assert [code_of(e["data"]["whois"]) for e in entries] == [None, None, "rate_limited", None]
    assert [code_of(e["data"]["ptr"]) for e in entries] == [None, "rate_limited", "rate_limited", None]
    assert all(e["data"]["geo"]["city"] == "Ashburn" for e in entries)
    assert profile.status_code == 200 and profile.headers["ratelimit-remaining"] == "3"
    spent = profile.json()["data"]
    assert [code_of(spent[part]) for part in PARTS] == [None, None, "rate_limited", "rate_limited", "rate_limited"]
    assert whois.status_code == 429 and whois.headers["ratelimit-limit"] == "2"


# Manners towards the registries -----------------------------------------------------------------------------------


def two_registry_hosts(rdap: RdapServer) -> None:
    """ARIN at 127.0.0.1 and RIPE at ``localhost``: the one local RDAP server under two host names, so that the
    service sees two registries (it bounds and backs off per host, as the bootstrap names them)."""
    arin, ripe = REGISTRIES["arin"][0], REGISTRIES["ripe"][0]
    services = [
        ([arin], [rdap.registry_url("arin")]),
        ([ripe], [rdap.registry_url("ripe").replace("127.0.0.1", "localhost")]),
    ]
    rdap.set_bootstrap(4, bootstrap_document(services))


async def test_a_registry_answering_429_is_not_asked_again_in_the_batch(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    two_registry_hosts(rdap)
    refused, late, after_a, after_b = "3.0.0.1", "3.0.0.2", "3.0.0.3", "3.0.0.4"
    ripe_a, ripe_b = "185.0.0.1", "185.0.0.2"
    rdap.set(rdap.ip_path("arin", refused), Reply.html_429())
    rdap.set(rdap.ip_path("arin", late), Reply.json(ARIN_NETWORK, delay=0.3))  # under way when the 429 comes
    for ip in (after_a, after_b):
        rdap.set(rdap.ip_path("arin", ip), Reply.json(ARIN_NETWORK))
    for ip in (ripe_a, ripe_b):
        rdap.set(rdap.ip_path("ripe", ip), Reply.json(RIPE_NETWORK))
    given = [refused, late, after_a, ripe_a, after_b, ripe_b]
    async with running_app(whois_settings) as client:
        entries = await batch(client, given, ["whois"])
        hits = {ip: rdap.hits[rdap.ip_path("arin", ip)] for ip in (refused, late, after_a, after_b)}
        again = await client.get(f"/whois/{after_a}")  # a new request: the registry is asked again
    whois = {e["ip"]: e["data"]["whois"] for e in entries}
    assert whois[refused]["error"]["code"] == "upstream_error" and "429" in whois[refused]["error"]["message"]
    assert whois[late]["handle"] == ARIN_NETWORK["handle"]
    for ip in (after_a, after_b):
        assert whois[ip]["error"]["code"] == "upstream_error", whois[ip]
        assert "not asked again" in whois[ip]["error"]["message"]
    for ip in (ripe_a, ripe_b):
        assert whois[ip]["registry"] == "RIPE NCC" and "error" not in whois[ip]
    assert hits == {refused: 1, late: 1, after_a: 0, after_b: 0}
    assert [rdap.hits[rdap.ip_path("ripe", ip)] for ip in (ripe_a, ripe_b)] == [1, 1]
    assert again.status_code == 200 and again.json()["data"]["handle"] == ARIN_NETWORK["handle"]
    assert rdap.hits[rdap.ip_path("arin", after_a)] == 1


async def test_at_most_two_lookups_go_to_one_registry_at_once(whois_settings: Settings, rdap: RdapServer) -> None:
    two_registry_hosts(rdap)
    arin = [f"3.0.1.{i}" for i in range(1, 9)]
    ripe = [f"185.0.1.{i}" for i in range(1, 9)]
    for ip in arin:
        rdap.set(rdap.ip_path("arin", ip), Reply.json(ARIN_NETWORK, delay=0.1))
    for ip in ripe:
        rdap.set(rdap.ip_path("ripe", ip), Reply.json(RIPE_NETWORK, delay=0.1))
    given = [ip for pair in zip(arin, ripe, strict=True) for ip in pair]
    async with running_app(whois_settings) as client:
        started = time.perf_counter()
        entries = await batch(client, given, ["whois"])
        elapsed = time.perf_counter() - started
    assert all("error" not in e["data"]["whois"] for e in entries), entries
    assert rdap.peak_at["arin"] == 2 and rdap.peak_at["ripe"] == 2, rdap.peak_at  # two at once, never more
    # Not faster than four rounds of two (a loaded machine only adds); the upper bound is on a hang.
    assert 0.35 < elapsed < 30, f"{elapsed:.2f} s for 8 lookups of 0.1 s, two at a time, per registry"


async def test_single_routes_are_not_held_back_by_a_batch_gate(whois_settings: Settings, rdap: RdapServer) -> None:
    """The bound is a batch's: concurrent single /whois requests are not queued behind each other."""
    ips = [f"3.0.2.{i}" for i in range(1, 7)]
    for ip in ips:
        rdap.set(rdap.ip_path("arin", ip), Reply.json(ARIN_NETWORK, delay=0.2))
    async with running_app(whois_settings) as client:
        answers = await asyncio.gather(*(client.get(f"/whois/{ip}") for ip in ips))
    assert [a.status_code for a in answers] == [200] * 6
    assert rdap.peak_at["arin"] > 2, rdap.peak_at
