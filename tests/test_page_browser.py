"""The page at / (docs/API.md#the-page--get--in-a-browser; issue 18): in headless Chromium against the real server process and the
local fake internet, and its headers and negotiation through ASGI.

The browser tests need Chromium (Debian's ``chromium`` package): skipped without it, except under CI=true (see
tests/support/browser.py). They render a public IPv4 address (every part, the map marker placed from the
coordinates), a public IPv6 address whose registry record carries markup (shown as text) and whose blacklist
part fails (shown in its place), and the loopback caller (a sentence and the search box), and check that the
page asked nothing of another host.

``IPINTEL_UPDATE_SCREENSHOT=1`` also writes the public address's screenshot to docs/page.png, which the README
shows (the test always takes one, into its temporary directory).
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from ipintel.api.page import CSP
from ipintel.app import create_app
from tests.support.app import ROOT, server_process
from tests.support.browser import Dom, Element, foreign, parse, render, require_chromium
from tests.support.dnsbl import query_name
from tests.support.fake_internet import FakeInternet
from tests.support.feeds import AWS_ADDRESS, AWS_V6_ADDRESS
from tests.support.mmdb import ASN_NETWORKS, CITY_NETWORKS, city_record, write_asn_db, write_city_db
from tests.support.rdap_server import Reply

PUBLIC_IP = AWS_ADDRESS  # 3.5.140.2, in the fake AWS feed (cloud:aws)
V6_IP = AWS_V6_ADDRESS  # 2600:1f14::1, in the fake AWS feed; IPv6 has no blacklist check
SEOUL = (37.5665, 126.978)
BOARDMAN = (45.8399, -119.7006)
PTR_NAME = "ec2-3-5-140-2.ap-northeast-2.compute.amazonaws.com"
HOLDER = "Amazon Technologies Inc."
# A registry remark that would run and load something if the page put it into the DOM as markup.
HOSTILE = '<script>document.title="pwned"</script><img src="/page/x.svg" onerror="document.title=1"> Example <b>Net</b>'
SCREENSHOT = ROOT / "docs" / "page.png"

CITY = {
    **CITY_NETWORKS,
    "3.5.140.0/22": city_record(
        country="KR", city="Seoul", region="Seoul", latitude=SEOUL[0], longitude=SEOUL[1], time_zone="Asia/Seoul"
    ),
    "2600:1f14::/35": city_record(
        country="US",
        city="Boardman",
        region="Oregon",
        latitude=BOARDMAN[0],
        longitude=BOARDMAN[1],
        time_zone="America/Los_Angeles",
    ),
}
AMAZON = {"autonomous_system_number": 16509, "autonomous_system_organization": "Amazon.com, Inc."}
ASN = {**ASN_NETWORKS, "3.5.140.0/22": AMAZON, "2600:1f14::/35": AMAZON}


def rdap_network(start: str, end: str, *, name: str, handle: str, **extra: Any) -> dict[str, Any]:
    """An ARIN-style RDAP ``ip network`` object (recognised as ARIN's by its port43 server)."""
    return {
        "objectClassName": "ip network",
        "rdapConformance": ["rdap_level_0"],
        "handle": handle,
        "startAddress": start,
        "endAddress": end,
        "ipVersion": "v6" if ":" in start else "v4",
        "name": name,
        "type": "DIRECT ALLOCATION",
        "port43": "whois.arin.net",
        "events": [
            {"eventAction": "registration", "eventDate": "2019-03-11T10:00:00-04:00"},
            {"eventAction": "last changed", "eventDate": "2021-07-20T09:30:00-04:00"},
        ],
        **extra,
    }


AMAZON_V4 = rdap_network(
    "3.0.0.0",
    "3.127.255.255",
    name="AT-88-Z",
    handle="NET-3-0-0-0-1",
    entities=[
        {
            "objectClassName": "entity",
            "handle": "AT-88-Z",
            "roles": ["registrant"],
            "vcardArray": [
                "vcard",
                [["version", {}, "text", "4.0"], ["fn", {}, "text", HOLDER], ["kind", {}, "text", "org"]],
            ],
        }
    ],
)
# No registrant entity: the holder is the first line of the "description" remark, as in older APNIC/RIPE records.
HOSTILE_V6 = rdap_network(
    "2600:1f14::",
    "2600:1f14:fff:ffff:ffff:ffff:ffff:ffff",
    name="AMAZON-PDX",
    handle="NET6-2600-1F14-1",
    remarks=[{"title": "description", "description": [HOSTILE, "second line"]}],
)


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    require_chromium()  # before starting anything
    tmp = tmp_path_factory.mktemp("page")
    with FakeInternet() as net:
        net.dns.add_ptr(PUBLIC_IP, PTR_NAME, ttl=60)
        net.dns.add(query_name(PUBLIC_IP, "healthy.test"), "A", "127.0.0.2", ttl=0)  # listed by one DNSBL

        def registries() -> None:
            assert net.rdap is not None
            net.rdap.set(net.rdap.ip_path("arin", PUBLIC_IP), Reply.json(AMAZON_V4))
            net.rdap.set(net.rdap.ip_path("arin", V6_IP), Reply.json(copy.deepcopy(HOSTILE_V6)))

        net.call(registries)
        env = {
            **net.env,
            "IPINTEL_GEOIP_CITY_DB": str(write_city_db(tmp / "city.mmdb", CITY)),
            "IPINTEL_GEOIP_ASN_DB": str(write_asn_db(tmp / "asn.mmdb", ASN)),
            "IPINTEL_DATA_DIR": str(tmp / "data"),
            # The page spends the API's tokens like any client; roomy limits, so that reloads cannot run out.
            "IPINTEL_RATE_LIMITS": "general=600,dns=300,registry=100",
            "IPINTEL_LOG_LEVEL": "ERROR",
        }
        with server_process(env) as (client, _proc):
            deadline = time.monotonic() + 30
            while client.get("/readyz").json()["data"]["checks"].get("feed_aws", {}).get("status") != "ok":
                assert time.monotonic() < deadline, "the fake AWS feed was not loaded in time"
                time.sleep(0.2)
            yield client


def done(html: str) -> bool:
    return 'data-state="done"' in html


def section(dom: Dom, name: str) -> Element:
    (found,) = [e for e in dom.elements if e.attrs.get("id") == f"part-{name}"]
    return found


def section_elements(dom: Dom, name: str) -> list[Element]:
    """The elements inside a section, in document order (the index's list is flat)."""
    start = dom.elements.index(section(dom, name))
    following = dom.elements[start + 1 :]
    end = next((i for i, e in enumerate(following) if e.tag == "section"), len(following))
    return following[:end]


def texts(elements: list[Element], tag: str) -> list[str]:
    return [e.text for e in elements if e.tag == tag]


def facts(dom: Dom, name: str) -> dict[str, str]:
    """A section's definition list as {term: description}."""
    elements = section_elements(dom, name)
    return dict(zip(texts(elements, "dt"), texts(elements, "dd"), strict=True))


def assert_offline(page: Any, dom: Dom) -> None:
    assert dom.loaded_urls(), "no script or stylesheet found in the rendered page"
    assert foreign(dom.loaded_urls(), page.url) == [], "the page refers to another host"
    assert foreign(page.requests, page.url) == [], f"the page requested another host: {page.requests}"


def has_profile_route(client: httpx.Client) -> bool:
    return "/ip/{ip}/profile" in client.get("/openapi.json").json()["paths"]


def test_page_shows_the_profile_of_a_public_address(page_server: httpx.Client, tmp_path: Path) -> None:
    client = page_server
    url = f"{client.base_url}/?ip={PUBLIC_IP}"
    started = time.perf_counter()
    page = render(url, ready=done, screenshot=tmp_path / "page.png", window=(1280, 1720))
    elapsed = time.perf_counter() - started
    dom = parse(page.dom)
    assert done(page.dom), f"the page did not finish within {page.budget_ms} ms of virtual time"
    assert "Could not get this part" not in page.dom

    assert [e.text for e in dom.elements if e.attrs.get("id") == "title"] == [PUBLIC_IP]
    location = facts(dom, "location")
    assert location["City"] == "Seoul"
    assert location["Region"] == "Seoul"
    assert "Korea" in location["Country"] and location["Country"].endswith("(KR)")  # the name from Chromium's ICU
    assert location["Time zone"].startswith("Asia/Seoul")
    assert location["Coordinates"] == "37.5665° N, 126.9780° E"

    network = facts(dom, "network")
    assert network == {"AS": "AS16509 Amazon.com, Inc.", "Organisation": "Amazon.com, Inc.", "Prefix": "3.5.140.0/22"}

    vpn = facts(dom, "vpn")
    assert vpn["VPN or anonymiser"] == "No" and vpn["Hosting (datacenter or cloud)"] == "Yes"
    assert vpn["Privacy relay"] == "No" and vpn["Operator"].startswith("AWS")  # the feed names the provider
    verdict = section(dom, "vpn").text
    assert "Anonymiser: No" in verdict and "Confidence medium" in verdict
    assert "cloud:aws" in texts(section_elements(dom, "vpn"), "code")

    whois = facts(dom, "whois")
    assert whois["Holder"] == HOLDER
    assert whois["Network"] == "AT-88-Z · NET-3-0-0-0-1"
    assert whois["Range"] == "3.0.0.0 – 3.127.255.255"
    assert whois["Registry"] == "ARIN"
    assert "registration: 2019-03-11" in whois["Dates"]

    # Every source of the check, with its status in words and its detail, as the API answers them.
    check = client.get(f"/blacklist/{PUBLIC_IP}").json()["data"]
    rows = [e for e in section_elements(dom, "blacklist") if e.tag == "tr" and "source" in e.classes]
    assert len(rows) == len(check["sources"]) >= 3
    words = {"listed": "Listed", "clear": "Clear", "unavailable": "Unavailable"}
    for row, source in zip(rows, check["sources"], strict=True):
        assert f"source-{source['status']}" in row.classes
        assert row.text.startswith(source["name"])
        assert words[source["status"]] in row.text
        assert " ".join(source.get("detail", "—").split()) in row.text
    assert check["status"] == "listed" and "Listed by 1 of" in section(dom, "blacklist").text

    assert texts(section_elements(dom, "ptr"), "code") == [PTR_NAME]

    # The map: the world outline from this service and one marker, placed by the equirectangular projection.
    images = [e for e in dom.elements if e.tag == "image"]
    assert [e.attrs["href"] for e in images] == ["/page/world.svg"]
    (marker,) = dom.by_class("map-marker")
    assert float(marker.attrs["cx"]) == pytest.approx(SEOUL[1] + 180)
    assert float(marker.attrs["cy"]) == pytest.approx(90 - SEOUL[0])
    assert any(u.endswith("/page/world.svg") for u in page.requests)

    # The page is a view of the profile route, and of nothing else: no single route is asked.
    assert has_profile_route(client)
    asked = [urlsplit(u).path for u in page.requests if urlsplit(u).path not in ("/", "/page/world.svg")]
    assert any("/profile?include=" in u for u in page.requests), page.requests
    assert asked and all(path.endswith("/profile") or path.startswith("/page/") for path in asked), page.requests
    assert_offline(page, dom)

    assert page.screenshot is not None and page.screenshot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("IPINTEL_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(page.screenshot, SCREENSHOT)
    assert elapsed < 120, f"rendering the page took {elapsed:.0f} s"


def test_upstream_markup_is_text_and_a_failed_part_says_why(page_server: httpx.Client, tmp_path: Path) -> None:
    url = f"{page_server.base_url}/?ip={quote(V6_IP)}"
    page = render(url, ready=done, window=(390, 2400))  # a phone's width
    dom = parse(page.dom)
    assert done(page.dom)

    # The remark is shown as the holder, character for character, and did nothing.
    assert facts(dom, "whois")["Holder"] == " ".join(HOSTILE.split())
    assert [e.attrs.get("src") for e in dom.elements if e.tag == "script"] == ["/page/render.js", "/page/page.js"]
    assert not [e for e in dom.elements if e.tag in ("img", "b")]
    assert [e.text for e in dom.elements if e.tag == "title"] == [f"{V6_IP} — ipintel"]
    assert not any("/page/x.svg" in u for u in page.requests)

    # IPv6 has no blacklist check: that part's error is in its place, and the other parts are shown.
    blacklist = section(dom, "blacklist")
    assert "Could not get this part" in blacklist.text and "ipv6_not_supported" in blacklist.text
    assert facts(dom, "location")["City"] == "Boardman"
    (marker,) = dom.by_class("map-marker")
    assert float(marker.attrs["cx"]) == pytest.approx(BOARDMAN[1] + 180)
    assert float(marker.attrs["cy"]) == pytest.approx(90 - BOARDMAN[0])
    assert_offline(page, dom)


def test_a_loopback_caller_gets_a_sentence_and_the_search_box(page_server: httpx.Client) -> None:
    page = render(f"{page_server.base_url}/", ready=done)  # Chromium connects from 127.0.0.1
    dom = parse(page.dom)
    assert done(page.dom)
    (status,) = [e for e in dom.elements if e.attrs.get("id") == "status"]
    assert "hidden" not in status.attrs
    assert "Your own address is not a public one" in status.text and "127.0.0.1" in status.text
    (profile,) = [e for e in dom.elements if e.attrs.get("id") == "profile"]
    assert "hidden" in profile.attrs
    (box,) = [e for e in dom.elements if e.tag == "input" and e.attrs.get("name") == "ip"]
    assert [e.text for e in dom.elements if e.tag == "label" and e.attrs.get("for") == box.attrs["id"]] == [
        "IP address"
    ]
    assert any(e.tag == "form" and e.attrs.get("role") == "search" for e in dom.elements)
    assert "Could not get this part" not in page.dom and "internal_error" not in page.dom
    assert_offline(page, dom)


@pytest.mark.parametrize(("asked", "said"), [("10.1.2.3", "private"), ("not-an-address", "not-an-address")])
def test_an_address_without_public_data_is_a_sentence(page_server: httpx.Client, asked: str, said: str) -> None:
    page = render(f"{page_server.base_url}/?ip={quote(asked)}", ready=done)
    dom = parse(page.dom)
    assert done(page.dom)
    (status,) = [e for e in dom.elements if e.attrs.get("id") == "status"]
    assert "hidden" not in status.attrs and status.text.startswith("Nothing to show.") and said in status.text
    (profile,) = [e for e in dom.elements if e.attrs.get("id") == "profile"]
    assert "hidden" in profile.attrs
    assert [e.attrs["id"] for e in dom.elements if e.tag == "input" and e.attrs.get("name") == "ip"] == ["ip"]
    assert "Could not get this part" not in page.dom
    assert_offline(page, dom)


# Headers and negotiation, without a browser ------------------------------------------------------------------

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.fixture
async def asgi(settings: Any) -> Any:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ipintel.test") as http:
            yield http


async def test_the_page_and_its_files_carry_the_csp(asgi: httpx.AsyncClient) -> None:
    page = await asgi.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CSP
    policy = dict(item.strip().split(" ", 1) for item in CSP.split(";"))
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    for directive in ("script-src", "style-src", "connect-src", "form-action"):
        assert policy[directive] == "'self'", directive
    assert page.headers["x-content-type-options"] == "nosniff" and "Accept" in page.headers["vary"]

    # Nothing inline for the policy to refuse, nothing from another host.
    dom = parse(page.text)
    scripts = [e for e in dom.elements if e.tag == "script"]
    assert scripts and all(
        e.attrs.get("src", "").startswith("/page/") and not "".join(e.parts).strip() for e in scripts
    )
    assert not [e for e in dom.elements if e.tag == "style" or "style" in e.attrs]
    assert not [e for e in dom.elements if any(a.startswith("on") for a in e.attrs)]
    assert foreign(dom.loaded_urls(), "http://ipintel.test/") == []

    for name, media in (("page.js", "text/javascript"), ("page.css", "text/css"), ("world.svg", "image/svg+xml")):
        asset = await asgi.get(f"/page/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(media), name
        assert asset.headers["content-security-policy"] == CSP
        again = await asgi.get(f"/page/{name}", headers={"If-None-Match": asset.headers["etag"]})
        assert again.status_code == 304
    assert "<style" not in (await asgi.get("/page/world.svg")).text  # shown under the page's policy
    assert len((await asgi.get("/page/world.svg")).content) < 300_000

    # Only the page's own files: no other name, no path outside the directory.
    for path in ("/page/index.html", "/page/nothing.js", "/page/..%2F__init__.py", "/page/"):
        missing = await asgi.get(path)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", path


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "application/json, text/html;q=0.5"])
async def test_other_clients_get_the_json_index(asgi: httpx.AsyncClient, accept: str | None) -> None:
    headers = {"Accept": accept} if accept is not None else {}
    if accept is None:
        asgi.headers.pop("Accept", None)
    index = await asgi.get("/", headers=headers)
    assert index.status_code == 200 and index.headers["content-type"] == "application/json"
    assert "Accept" in index.headers["vary"]
    data = index.json()["data"]
    assert data["docs"] == "/docs" and data["openapi"] == "/openapi.json"
    assert {"/ip/{ip}", "/whois/{ip}", "/blacklist/{ip}"} <= set(data["routes"])
