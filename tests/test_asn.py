"""``GET /asn/{asn}`` (docs/API.md#as-record): the registry part against the local RDAP world
(tests/support/rdap_server.py: ``asn.json`` and ``autnum`` answers, redirects, 404s, failures), from a real
ARIN answer and a RIPE one built to RIPE's format (tests/fixtures/README.md); ``prefixes`` from fixture ASN
databases (tests/support/mmdb.py); the number's parsing and the ``asn.json`` table."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ipintel import addresses
from ipintel.capabilities import asn as asn_capability
from ipintel.capabilities.whois import parse_autnum
from ipintel.errors import ApiError, UpstreamError
from ipintel.infra.mmdb import MmdbFile
from ipintel.infra.rdap_bootstrap import parse_asn_bootstrap
from ipintel.settings import Settings
from tests.support.app import running_app, validator
from tests.support.mmdb import reload_changed, write_asn_db
from tests.support.rdap_server import RdapServer, Reply, bootstrap_document, rdap_fixture

ASN_SCHEMA = validator("asn")

GOOGLE = {
    "asn": "AS15169",
    "name": "GOOGLE",
    "org": "Google LLC",
    "country": None,  # ARIN gives none on AS records
    "registry": "ARIN",
    "handle": "AS15169",
    "events": [
        {"action": "last changed", "date": "2012-02-24T09:44:34-05:00"},
        {"action": "registration", "date": "2000-03-30T00:00:00-05:00"},
    ],
    # Nested under the registrant GOGL, as ARIN does.
    "abuse": {"email": "network-abuse@google.com", "phone": "+1-650-253-0000", "name": "Abuse"},
}


# Parsing ----------------------------------------------------------------------------------------


def test_arin_autnum_real_answer() -> None:
    record = parse_autnum(15169, rdap_fixture("arin_autnum_15169"), registry="ARIN")
    assert record == GOOGLE
    ASN_SCHEMA.validate({**record, "prefixes": None})


def test_ripe_autnum_org_skips_maintainers_and_abuse_is_top_level() -> None:
    record = parse_autnum(3333, rdap_fixture("ripe_autnum_3333"), registry="RIPE NCC")
    assert record == {
        "asn": "AS3333",
        "name": "RIPE-NCC-AS",
        "org": "Reseaux IP Europeens Network Coordination Centre (RIPE NCC)",
        "country": None,
        "registry": "RIPE NCC",
        "handle": "AS3333",
        "events": [
            {"action": "registration", "date": "2002-09-24T14:09:43+00:00"},
            {"action": "last changed", "date": "2024-06-19T08:57:53+00:00"},
        ],
        "abuse": {"email": "abuse@ripe.net", "phone": "+31 20 535 4444", "name": "RIPE NCC Operations"},
    }


def test_a_block_answer_keeps_the_number_asked_and_names_the_block() -> None:
    document = {"objectClassName": "autnum", "handle": "AS64496-AS64511", "startAutnum": 64496, "endAutnum": 64511}
    document |= {"country": "au", "name": 7, "entities": "x", "events": None}
    record = parse_autnum(64500, document, registry=None)
    ASN_SCHEMA.validate({**record, "prefixes": []})
    assert (record["asn"], record["handle"], record["country"], record["name"]) == (
        "AS64500",
        "AS64496-AS64511",
        "AU",
        None,
    )
    assert (record["org"], record["abuse"], record["events"]) == (None, None, [])


@pytest.mark.parametrize(
    ("text", "number"),
    [("AS13335", 13335), ("13335", 13335), ("as13335", 13335), ("As0", 0), ("AS4294967295", 4294967295)],
)
def test_as_numbers_are_read_in_asplain(text: str, number: int) -> None:
    assert addresses.parse_asn(text) == number


@pytest.mark.parametrize(
    "text",
    ["", "AS", "ASX", "AS-1", "-1", "+5", "AS 1", " 1", "1 ", "1.10", "AS1.10", "4294967296", "AS99999999999",
     "١٢٣", "AS１２", "13335\n", "0x10", "AS13335AS", "A" * 10_000],
)  # fmt: skip
def test_anything_else_is_invalid_asn(text: str) -> None:
    with pytest.raises(ApiError) as raised:
        addresses.parse_asn(text)
    assert raised.value.code == "invalid_asn"
    assert len(raised.value.message) < 200


def test_asn_bootstrap_ranges_single_numbers_and_gaps() -> None:
    table = parse_asn_bootstrap(
        {
            "services": [
                [
                    ["1-1876", "13335", "junk", "5-3", "99999999999", 7, "1.2"],
                    ["http://a.example", "https://arin.example"],
                ],
                [["1877-1901", "3333-3333"], ["https://ripe.example/"]],
                [["1900-1950"], ["https://overlaps.example/"]],  # overlaps RIPE's range: skipped
                [["4608-4865"], ["ftp://nowhere/"]],  # no usable URL: skipped
                "junk",
            ]
        }
    )
    assert len(table) == 4
    assert table.base_url(1) == table.base_url(1876) == table.base_url(13335) == "https://arin.example/"
    assert table.base_url(1877) == table.base_url(3333) == "https://ripe.example/"
    for outside in (0, 1902, 1949, 3332, 3334, 4608, 13334, 13336, 2**32 - 1):
        assert table.base_url(outside) is None, outside


@pytest.mark.parametrize(
    "document", [{}, {"services": "x"}, {"services": []}, [], {"services": [[["x"], ["https://a/"]]]}]
)
def test_an_asn_bootstrap_without_usable_services_is_an_upstream_error(document: object) -> None:
    with pytest.raises(UpstreamError):
        parse_asn_bootstrap(document)


# Prefixes from an ASN database ------------------------------------------------------------------------


def test_prefix_index_reads_both_record_shapes_and_both_families(tmp_path: Path) -> None:
    path = write_asn_db(
        tmp_path / "asn.mmdb",
        {
            "1.1.1.0/24": {"asn": "AS13335", "as_name": "Cloudflare, Inc."},  # IPinfo's shape
            "104.16.0.0/13": {"autonomous_system_number": 13335, "autonomous_system_organization": "CLOUDFLARENET"},
            "2606:4700::/32": {"autonomous_system_number": 13335},
            "8.8.8.0/24": {"autonomous_system_number": 15169},
            "9.9.9.0/24": {"autonomous_system_organization": "no number"},
        },
    )
    db = MmdbFile(path, kind="asn", indexer=asn_capability.AsnPrefixes.build)
    assert db.load()
    index = db.index_now(timeout=10)  # built in the background after the load
    assert isinstance(index, asn_capability.AsnPrefixes)
    assert index.prefixes(13335) == ["1.1.1.0/24", "104.16.0.0/13", "2606:4700::/32"]
    assert index.prefixes(15169) == ["8.8.8.0/24"]
    assert index.prefixes(64512) == []
    assert index.networks == 5


def test_a_database_too_large_to_index_gives_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asn_capability, "MAX_INDEXED_NETWORKS", 2)
    db = MmdbFile(write_asn_db(tmp_path / "asn.mmdb"), kind="asn", indexer=asn_capability.AsnPrefixes.build)
    assert db.load()  # the database still answers lookups
    assert db.index_now(timeout=10) is None


def test_an_indexer_that_fails_leaves_the_database_usable(tmp_path: Path) -> None:
    def broken(reader: object) -> None:
        raise RuntimeError("boom")

    db = MmdbFile(write_asn_db(tmp_path / "asn.mmdb"), kind="asn", indexer=broken)
    assert db.load()
    assert db.index_now(timeout=10) is None and db.loaded


# Through the API ------------------------------------------------------------------------------------


@pytest.fixture
def rdap(rdap: RdapServer) -> RdapServer:
    """The RDAP world (conftest): asn.json gives ARIN 1-1876, 13335, 15169, 16509 and RIPE 1877-1901, 3333 ..."""
    rdap.set(rdap.autnum_path("arin", 15169), Reply.json(rdap_fixture("arin_autnum_15169")))
    rdap.set(rdap.autnum_path("ripe", 3333), Reply.json(rdap_fixture("ripe_autnum_3333")))
    return rdap


async def test_an_arin_as_with_its_prefixes(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:  # answers are checked against schemas/asn.json
        answers = [await client.get(f"/asn/{text}") for text in ("AS15169", "15169", "as15169")]
    assert [a.status_code for a in answers] == [200, 200, 200], answers[0].text
    data = answers[0].json()["data"]
    # The fixture ASN database (tests/support/mmdb.py) lists these for AS15169.
    assert data == {**GOOGLE, "prefixes": ["8.8.4.0/24", "8.8.8.0/24", "2001:4860::/32"]}
    assert all(a.json()["data"] == data for a in answers)
    assert rdap.hits[rdap.autnum_path("arin", 15169)] == 1  # one spelling, one cache entry
    assert rdap.hits["/bootstrap/asn.json"] == 1
    assert rdap.hits["/bootstrap/ipv4.json"] == 0


async def test_a_ripe_as_the_database_lists_no_network_for(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:
        response = await client.get("/asn/AS3333")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (data["registry"], data["org"], data["prefixes"]) == (
        "RIPE NCC",
        "Reseaux IP Europeens Network Coordination Centre (RIPE NCC)",
        [],
    )


async def test_prefixes_are_null_without_an_asn_database(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings.replace(geoip_asn_db=None)) as client:
        response = await client.get("/asn/AS15169")
    assert response.status_code == 200
    assert response.json()["data"]["prefixes"] is None


async def test_a_reload_shows_new_prefixes_without_asking_the_registry_again(
    whois_settings: Settings, rdap: RdapServer, tmp_path: Path
) -> None:
    path = write_asn_db(tmp_path / "asn.mmdb", {"8.8.8.0/24": {"autonomous_system_number": 15169}})
    async with running_app(whois_settings.replace(geoip_asn_db=path)) as client:
        before = (await client.get("/asn/AS15169")).json()["data"]["prefixes"]
        networks: dict[str, dict[str, Any]] = {
            "8.8.8.0/24": {"autonomous_system_number": 15169},
            "34.0.0.0/15": {"asn": "AS15169"},
        }
        write_asn_db(tmp_path / "asn.mmdb", networks)
        intel = client.app.state.intel
        assert "asn" in reload_changed(intel.databases)
        after = (await client.get("/asn/AS15169")).json()["data"]["prefixes"]
    assert before == ["8.8.8.0/24"]
    assert after == ["8.8.8.0/24", "34.0.0.0/15"]
    assert rdap.hits[rdap.autnum_path("arin", 15169)] == 1


async def test_redirect_to_the_rir_holding_a_transferred_as(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.autnum_path("arin", 1000), Reply.redirect("../../ripe/autnum/1000", status=301))
    rdap.set(rdap.autnum_path("ripe", 1000), Reply.json(rdap_fixture("ripe_autnum_3333")))
    async with running_app(whois_settings) as client:
        response = await client.get("/asn/AS1000")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (data["asn"], data["registry"], data["handle"]) == ("AS1000", "RIPE NCC", "AS3333")
    assert rdap.hits[rdap.autnum_path("ripe", 1000)] == 1


async def test_a_redirect_loop_is_an_upstream_error(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.autnum_path("arin", 1001), Reply.redirect(rdap.url(rdap.autnum_path("ripe", 1001))))
    rdap.set(rdap.autnum_path("ripe", 1001), Reply.redirect(rdap.url(rdap.autnum_path("arin", 1001))))
    async with running_app(whois_settings) as client:
        response = await client.get("/asn/1001")
    assert response.status_code == 502
    assert "loop" in response.json()["error"]["message"]


async def test_unregistered_as_is_registration_not_found_and_kept_five_minutes(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    async with running_app(whois_settings) as client:
        at_registry = [await client.get("/asn/AS1002") for _ in range(2)]  # ARIN's range, its 404
        nobody = await client.get("/asn/AS64512")  # private use: no registry in asn.json
    for response in (*at_registry, nobody):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "registration_not_found"
    assert "AS number" in at_registry[0].json()["error"]["message"]
    assert "AS64512" in nobody.json()["error"]["message"]
    assert rdap.hits[rdap.autnum_path("arin", 1002)] == 1


@pytest.mark.parametrize(
    "path", ["/asn/ASX", "/asn/AS", "/asn/-1", "/asn/AS4294967296", "/asn/1.10", "/asn/AS%201", "/asn/%D9%A1", "/asn/" + "9" * 3000]
)  # fmt: skip
async def test_bad_as_numbers_never_reach_a_registry(whois_settings: Settings, rdap: RdapServer, path: str) -> None:
    async with running_app(whois_settings) as client:
        response = await client.get(path)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_asn"
    assert sum(rdap.hits.values()) == 0


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply.json(rdap_fixture("arin_3_0_0_0")), "autnum object"),
        (Reply.server_error(503), "503"),
        (Reply.invalid_json(), "invalid JSON"),
        (Reply.html_429(), "429"),
    ],
    ids=["ip-network-object", "503", "invalid-json", "429"],
)
async def test_registry_failures_are_upstream_errors_and_not_cached(
    whois_settings: Settings, rdap: RdapServer, reply: Reply, words: str
) -> None:
    rdap.set(rdap.autnum_path("arin", 16509), reply)
    async with running_app(whois_settings) as client:
        first = await client.get("/asn/AS16509")
        await client.get("/asn/AS16509")
    assert first.status_code == 502
    assert words in first.json()["error"]["message"]
    assert rdap.hits[rdap.autnum_path("arin", 16509)] == 2


async def test_a_slow_registry_is_a_timeout(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.autnum_path("arin", 16509), Reply.slow(5.0, rdap_fixture("arin_autnum_15169")))
    async with running_app(whois_settings.replace(upstream_timeout=0.3)) as client:
        response = await client.get("/asn/AS16509")
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


async def test_asn_bootstrap_fetched_once_for_concurrent_lookups(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:
        responses = await asyncio.gather(*(client.get(f"/asn/{n}") for n in (15169, 3333, 1002, 15169)))
    assert [r.status_code for r in responses] == [200, 200, 404, 200]
    assert rdap.hits["/bootstrap/asn.json"] == 1


async def test_an_unusable_asn_bootstrap_is_an_upstream_error(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set_asn_bootstrap(bootstrap_document([]))
    async with running_app(whois_settings) as client:
        response = await client.get("/asn/AS15169")
    assert response.status_code == 502
    assert "asn.json" in response.json()["error"]["message"]


def _schema_of(document: dict[str, Any]) -> dict[str, Any]:
    return document["paths"]["/asn/{asn}"]["get"]


async def test_openapi_describes_the_route(settings: Settings) -> None:
    async with running_app(settings) as client:
        operation = _schema_of((await client.get("/openapi.json")).json())
    assert operation["operationId"] == "lookupAsn"
    assert {"200", "400", "404", "429", "502", "504"} <= operation["responses"].keys()


async def test_the_index_is_built_after_the_load_and_waited_for_with_a_bound(tmp_path: Path) -> None:
    """The AS -> networks walk takes seconds for a real ASN file (issue 22: 5 s at start for 11 MB), so the
    load returns first and the index follows in a thread; /asn waits for it, within a bound."""
    import threading

    release = threading.Event()

    def slow(reader: object) -> asn_capability.AsnPrefixes | None:
        release.wait(10)
        return asn_capability.AsnPrefixes.build(reader)  # type: ignore[arg-type]

    db = MmdbFile(write_asn_db(tmp_path / "asn.mmdb"), kind="asn", indexer=slow)
    assert db.load() and db.loaded  # answers lookups while the index is being built
    assert db.index is None
    assert await db.wait_index(0.05) is None  # not built within the bound: prefixes are null, not late
    waiting = asyncio.create_task(db.wait_index(10))
    release.set()
    index = await waiting
    assert isinstance(index, asn_capability.AsnPrefixes) and index.prefixes(15169)
