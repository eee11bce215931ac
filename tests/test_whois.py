"""``GET /whois/{ip}`` end to end: the app talks real HTTP to a local RDAP world
(tests/support/rdap_server.py) - bootstrap, registries, redirects and failures. The ``rdap``
fixture (conftest) serves the five RIRs with the space of ``rdap_server.REGISTRIES``.

Registry hosts cannot be named on 127.0.0.1, so the last tests use
aioresponses with the RIRs' real host names for what depends on them
(registry by host, HTTPS preference, HTTPS->HTTP downgrades).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import time

import pytest

from ipintel.capabilities import whois
from ipintel.errors import ApiError
from ipintel.infra.rdap_bootstrap import RdapBootstrap
from ipintel.infra.upstream import HttpClient
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.http_mock import mock_http
from tests.support.rdap_server import RdapServer, Reply, bootstrap_document, rdap_fixture


@pytest.mark.parametrize(
    ("registry", "fixture", "ip", "rir", "expected"),
    [
        (
            "arin",
            "arin_v4_2024",
            "23.45.67.89",
            "ARIN",
            {"registrant": "Example Cloud Networks, Inc.", "country": None},
        ),
        ("ripe", "ripe_2024", "185.12.64.10", "RIPE NCC", {"registrant": "Example Netz GmbH", "country": "DE"}),
        ("apnic", "apnic_2024", "101.45.3.4", "APNIC", {"registrant": "Example Pacific Pty Ltd", "country": "AU"}),
        ("lacnic", "lacnic", "200.7.85.1", "LACNIC", {"registrant": "EJEMPLO SOCIEDAD ANONIMA", "name": None}),
        ("afrinic", "afrinic", "41.203.70.1", "AFRINIC", {"registrant": None, "country": "NG"}),
        ("arin", "arin_v6", "2604:a880:400::1", "ARIN", {"startAddress": "2604:a880::"}),
        ("ripe", "ripe_v6", "2a01:4f8:1:2::3", "RIPE NCC", {"registrant": "Example Hosting AG"}),
    ],
)
async def test_each_rir_through_the_api(
    whois_settings: Settings,
    rdap: RdapServer,
    registry: str,
    fixture: str,
    ip: str,
    rir: str,
    expected: dict[str, object],
) -> None:
    rdap.set(rdap.ip_path(registry, ip), Reply.json(rdap_fixture(fixture)))
    async with running_app(whois_settings) as client:
        response = await client.get(f"/whois/{ip}")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["ip"] == ip
    assert data["registry"] == rir  # by port43: the host is 127.0.0.1
    assert data["events"]
    for field, value in expected.items():
        assert data[field] == value
    assert rdap.hits[rdap.ip_path(registry, ip)] == 1


async def test_ipv4_mapped_ipv6_is_looked_up_as_ipv4(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.ip_path("arin", "23.45.67.89"), Reply.json(rdap_fixture("arin_v4_2024")))
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/::ffff:23.45.67.89")
    assert response.status_code == 200
    assert response.json()["data"]["ip"] == "23.45.67.89"
    assert rdap.hits["/bootstrap/ipv6.json"] == 0


async def test_redirect_to_another_rir_relative_location(whois_settings: Settings, rdap: RdapServer) -> None:
    """Transferred space: ARIN's bootstrap range, held by RIPE now."""
    ip = "23.99.1.2"
    rdap.set(rdap.ip_path("arin", ip), Reply.redirect(f"../../ripe/ip/{ip}", status=301))
    rdap.set(rdap.ip_path("ripe", ip), Reply.json(rdap_fixture("ripe_2024")))
    async with running_app(whois_settings) as client:
        response = await client.get(f"/whois/{ip}")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["registry"] == "RIPE NCC"
    assert rdap.hits[rdap.ip_path("arin", ip)] == 1
    assert rdap.hits[rdap.ip_path("ripe", ip)] == 1


async def test_five_redirects_are_followed_and_a_sixth_is_refused(whois_settings: Settings, rdap: RdapServer) -> None:
    ip, other = "23.1.1.1", "23.2.2.2"
    hops = [f"/hop{n}/ip/{ip}" for n in range(6)]
    rdap.set(rdap.ip_path("arin", ip), Reply.redirect(rdap.url(hops[0])))
    for here, there in itertools.pairwise(hops[:5]):
        rdap.set(here, Reply.redirect(there, status=307))
    rdap.set(hops[4], Reply.json(rdap_fixture("afrinic")))  # 5 redirects, then the answer
    rdap.set(rdap.ip_path("arin", other), Reply.redirect(rdap.url(hops[0].replace(ip, other))))
    for n in range(5):
        rdap.set(hops[n].replace(ip, other), Reply.redirect(hops[n + 1].replace(ip, other)))
    async with running_app(whois_settings) as client:
        five = await client.get(f"/whois/{ip}")
        six = await client.get(f"/whois/{other}")
    assert five.status_code == 200, five.text
    assert six.status_code == 502
    assert six.json()["error"]["code"] == "upstream_error"
    assert "redirected more than 5" in six.json()["error"]["message"]
    # Six requests in all: the sixth answered a sixth redirect, which is not followed.
    assert rdap.hits[hops[4].replace(ip, other)] == 1
    assert rdap.hits[hops[5].replace(ip, other)] == 0


async def test_redirect_loop_is_detected(whois_settings: Settings, rdap: RdapServer) -> None:
    ip = "91.198.174.2"
    rdap.set(rdap.ip_path("ripe", ip), Reply.redirect(rdap.url(rdap.ip_path("arin", ip))))
    rdap.set(rdap.ip_path("arin", ip), Reply.redirect(rdap.url(rdap.ip_path("ripe", ip))))
    async with running_app(whois_settings) as client:
        response = await client.get(f"/whois/{ip}")
    assert response.status_code == 502
    assert "loop" in response.json()["error"]["message"]
    assert rdap.hits[rdap.ip_path("ripe", ip)] == 1
    assert rdap.hits[rdap.ip_path("arin", ip)] == 1


@pytest.mark.parametrize("content_type", ["application/json", "application/rdap+json; charset=utf-8"])
async def test_plain_json_and_parameters_are_accepted(
    whois_settings: Settings, rdap: RdapServer, content_type: str
) -> None:
    rdap.set(rdap.ip_path("lacnic", "200.7.85.1"), Reply.json(rdap_fixture("lacnic"), content_type=content_type))
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/200.7.85.1")
    assert response.status_code == 200
    assert response.json()["data"]["registrant"] == "EJEMPLO SOCIEDAD ANONIMA"


async def test_redirect_to_a_non_http_url_is_refused(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.ip_path("arin", "23.5.5.5"), Reply.redirect("ftp://rdap.example.net/ip/23.5.5.5"))
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/23.5.5.5")
    assert response.status_code == 502
    assert "non-HTTP" in response.json()["error"]["message"]


async def test_redirect_without_location_is_an_upstream_error(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.ip_path("arin", "23.3.3.3"), Reply(status=302, body=b"", content_type=None))
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/23.3.3.3")
    assert response.status_code == 502


async def test_unregistered_address_is_registration_not_found(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:
        at_registry = await client.get("/whois/23.4.4.4")  # the registry answers 404
        nobody = await client.get("/whois/7.7.7.7")  # no registry in the bootstrap
    assert at_registry.status_code == 404
    assert at_registry.json()["error"]["code"] == "registration_not_found"
    assert nobody.status_code == 404
    assert nobody.json()["error"]["code"] == "registration_not_found"


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply.html_429(), "429"),
        (Reply.server_error(503), "503"),
        (Reply.server_error(500), "500"),
        (Reply(status=403, body=b"forbidden", content_type="text/plain"), "403"),
        (Reply.invalid_json(), "invalid JSON"),
        (Reply(status=200, body=b"<html>maintenance</html>", content_type="text/html"), "text/html"),
        (Reply.json({"objectClassName": "entity", "handle": "X"}), "ip network"),
        (Reply.json(["not", "an", "object"]), "ip network"),
        (Reply.json({"errorCode": 400, "title": "bad"}), "ip network"),
        (Reply.oversized(3 * 1024 * 1024), "over"),
        (Reply.oversized(3 * 1024 * 1024, streamed=True), "over"),
    ],
    ids=[
        "ripe-html-429",
        "503",
        "500",
        "403",
        "invalid-json",
        "html-200",
        "entity-object",
        "json-array",
        "rdap-error-object",
        "oversized-declared",
        "oversized-streamed",
    ],
)
async def test_registry_failures_are_upstream_errors(
    whois_settings: Settings, rdap: RdapServer, reply: Reply, words: str
) -> None:
    rdap.set(rdap.ip_path("ripe", "185.12.64.10"), reply)
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/185.12.64.10")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_error"
    assert words in error["message"]


async def test_a_body_just_under_the_cap_is_read(whois_settings: Settings, rdap: RdapServer) -> None:
    document = rdap_fixture("lacnic")
    document["padding"] = "x" * (2 * 1024 * 1024 - 10_000)
    rdap.set(rdap.ip_path("lacnic", "200.7.85.1"), Reply.json(document))
    async with running_app(whois_settings) as client:
        response = await client.get("/whois/200.7.85.1")
    assert response.status_code == 200


async def test_a_slow_registry_is_a_timeout_near_the_configured_limit(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    limit = 0.3
    rdap.set(rdap.ip_path("apnic", "101.45.3.4"), Reply.slow(5.0, rdap_fixture("apnic_2024")))
    async with running_app(whois_settings.replace(upstream_timeout=limit)) as client:
        await client.get("/whois/7.7.7.7")  # bootstrap loaded first, so only the registry is timed
        started = time.perf_counter()
        response = await client.get("/whois/101.45.3.4")
        elapsed = time.perf_counter() - started
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    # Not before the limit; and before the registry's 5 s answer could have come (a loaded machine only adds).
    assert limit * 0.9 <= elapsed < 5.0


async def test_non_global_and_invalid_addresses_never_reach_a_registry(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    async with running_app(whois_settings) as client:
        private = await client.get("/whois/10.1.2.3")
        documentation = await client.get("/whois/2001:db8::1")
        invalid = await client.get("/whois/not-an-ip")
        zone = await client.get("/whois/fe80::1%25eth0")
    assert private.status_code == 422 and private.json()["error"]["code"] == "reserved_address"
    assert "private" in private.json()["error"]["message"]
    assert documentation.status_code == 422
    assert invalid.status_code == 400 and invalid.json()["error"]["code"] == "invalid_ip"
    assert zone.status_code == 400
    assert sum(rdap.hits.values()) == 0


# Bootstrap ------------------------------------------------------------------------


async def test_bootstrap_fetched_once_for_many_concurrent_lookups(whois_settings: Settings, rdap: RdapServer) -> None:
    ips = [f"23.45.{n}.1" for n in range(20)]
    for ip in ips:
        rdap.set(rdap.ip_path("arin", ip), Reply.json(rdap_fixture("arin_v4_2024")))
    async with running_app(whois_settings) as client:
        responses = await asyncio.gather(*(client.get(f"/whois/{ip}") for ip in ips))
        again = await client.get(f"/whois/{ips[0]}")
    assert [r.status_code for r in responses] == [200] * 20
    assert again.status_code == 200
    assert rdap.hits["/bootstrap/ipv4.json"] == 1
    assert rdap.hits["/bootstrap/ipv6.json"] == 0  # fetched only when an IPv6 lookup needs it


async def test_longest_prefix_picks_the_more_specific_registry(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set_bootstrap(
        4,
        bootstrap_document(
            [(["23.0.0.0/8"], [rdap.registry_url("arin")]), (["23.45.0.0/16"], [rdap.registry_url("ripe")])]
        ),
    )
    rdap.set(rdap.ip_path("ripe", "23.45.67.89"), Reply.json(rdap_fixture("ripe_2024")))
    rdap.set(rdap.ip_path("arin", "23.46.0.1"), Reply.json(rdap_fixture("arin_v4_2024")))
    async with running_app(whois_settings) as client:
        specific = await client.get("/whois/23.45.67.89")
        covering = await client.get("/whois/23.46.0.1")
    assert specific.json()["data"]["registry"] == "RIPE NCC"
    assert covering.json()["data"]["registry"] == "ARIN"


async def test_unreachable_bootstrap_is_an_upstream_error(settings: Settings) -> None:
    # The settings fixture points the bootstrap at a closed local port.
    async with running_app(settings) as client:
        response = await client.get("/whois/8.8.8.8")
    assert response.status_code == 502
    assert "bootstrap" in response.json()["error"]["message"]


async def test_slow_bootstrap_is_a_timeout(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set_bootstrap(4, None, reply=Reply.slow(5.0))
    async with running_app(whois_settings.replace(upstream_timeout=0.2)) as client:
        response = await client.get("/whois/23.45.67.89")
    assert response.status_code == 504


async def test_failed_first_fetch_is_shared_and_retried_on_the_next_lookup(rdap: RdapServer, http: HttpClient) -> None:
    document = bootstrap_document([(["23.0.0.0/8"], [rdap.registry_url("arin")])])
    rdap.set_bootstrap(4, None, reply=Reply.server_error(500))
    bootstrap = RdapBootstrap(rdap.bootstrap_url, http)
    results = await asyncio.gather(*(_table(bootstrap) for _ in range(10)), return_exceptions=True)
    assert all(isinstance(r, ApiError) and r.code == "upstream_error" for r in results)
    assert rdap.hits["/bootstrap/ipv4.json"] == 1
    rdap.set_bootstrap(4, document)
    assert len(await bootstrap.table(4)) == 1
    assert rdap.hits["/bootstrap/ipv4.json"] == 2


async def test_refreshed_daily_and_a_failed_refresh_keeps_the_last_good_copy(
    rdap: RdapServer, http: HttpClient
) -> None:
    now = [1000.0]
    path = "/bootstrap/ipv4.json"
    rdap.set_bootstrap(4, bootstrap_document([(["23.0.0.0/8"], [rdap.registry_url("arin")])]))
    bootstrap = RdapBootstrap(rdap.bootstrap_url, http, retry_after=600, clock=lambda: now[0])
    ip = ipaddress.ip_address("23.1.1.1")
    assert await bootstrap.base_url_for(ip) == rdap.registry_url("arin")
    now[0] += 23 * 3600
    await bootstrap.base_url_for(ip)
    assert rdap.hits[path] == 1  # not refreshed within the day

    rdap.set_bootstrap(4, None, reply=Reply.server_error(503))
    now[0] += 2 * 3600
    assert await bootstrap.base_url_for(ip) == rdap.registry_url("arin")  # the last good copy
    assert rdap.hits[path] == 2
    now[0] += 300
    await bootstrap.base_url_for(ip)
    assert rdap.hits[path] == 2  # a failed refresh is retried after a pause, not per lookup

    rdap.set_bootstrap(4, bootstrap_document([(["23.0.0.0/8"], [rdap.registry_url("ripe")])]))
    now[0] += 301
    assert await bootstrap.base_url_for(ip) == rdap.registry_url("ripe")
    assert rdap.hits[path] == 3


async def _table(bootstrap: RdapBootstrap) -> object:
    return await bootstrap.table(4)


async def test_upstream_statistics_name_rdap_and_bootstrap(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.ip_path("arin", "23.45.67.89"), Reply.json(rdap_fixture("arin_v4_2024")))
    async with running_app(whois_settings) as client:
        await client.get("/whois/23.45.67.89")
        calls = client.app.state.intel.upstream_stats.calls
    assert calls[("rdap-bootstrap", "ok")] == 1
    assert calls[("rdap", "ok")] == 1


# Real registry host names (aioresponses, through mock_http) ----------------------------------------------

IANA = "https://data.iana.org/rdap/"


def _iana_ipv4(mock: mock_http) -> None:
    mock.get(
        IANA + "ipv4.json",
        payload=bootstrap_document(
            [
                (["23.0.0.0/8"], ["http://rdap.arin.net/registry/", "https://rdap.arin.net/registry/"]),
                (["177.0.0.0/8"], ["https://rdap.lacnic.net/rdap/"]),
            ]
        ),
    )


async def _lookup(http: HttpClient, ip: str) -> dict[str, object]:
    return await whois.lookup(ipaddress.ip_address(ip), http=http, bootstrap=RdapBootstrap(IANA, http))


async def test_https_preferred_and_registry_by_host_after_a_redirect(http: HttpClient) -> None:
    ripe_without_port43 = rdap_fixture("ripe_2024")
    del ripe_without_port43["port43"]
    with mock_http() as mock:
        _iana_ipv4(mock)
        mock.get(
            "https://rdap.arin.net/registry/ip/23.99.1.2",
            status=302,
            headers={"location": "https://rdap.db.ripe.net/ip/23.99.1.2"},  # lower-case header name
        )
        mock.get(
            "https://rdap.db.ripe.net/ip/23.99.1.2",
            payload=ripe_without_port43,
            content_type="application/rdap+json",
        )
        record = await _lookup(http, "23.99.1.2")
    assert record["registry"] == "RIPE NCC"


async def test_https_to_http_downgrade_is_refused(http: HttpClient) -> None:
    with mock_http() as mock:
        _iana_ipv4(mock)
        mock.get(
            "https://rdap.arin.net/registry/ip/23.99.1.2",
            status=301,
            headers={"Location": "http://rdap.db.ripe.net/ip/23.99.1.2"},
        )
        with pytest.raises(ApiError) as raised:
            await _lookup(http, "23.99.1.2")
        asked = {str(url) for _, url in mock.requests}
    assert raised.value.code == "upstream_error"
    assert "HTTPS to HTTP" in raised.value.message
    assert "http://rdap.db.ripe.net/ip/23.99.1.2" not in asked


async def test_nicbr_reached_through_lacnic_is_lacnic(http: HttpClient) -> None:
    with mock_http() as mock:
        _iana_ipv4(mock)
        mock.get(
            "https://rdap.lacnic.net/rdap/ip/177.33.1.1",
            status=301,
            headers={"Location": "https://rdap.registro.br/ip/177.33.1.1"},
        )
        mock.get("https://rdap.registro.br/ip/177.33.1.1", payload=rdap_fixture("nicbr"))
        record = await _lookup(http, "177.33.1.1")
    assert record["registry"] == "LACNIC"
    assert record["registrant"] == "Exemplo Telecom S.A."
