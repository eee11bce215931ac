"""/docs in a real browser: Swagger UI, served by the real server process, renders every
operation of /openapi.json (OpenAPI 3.1, which Swagger UI 4 cannot render) and loads
nothing from another host.

Needs Chromium (Debian's ``chromium`` package): skipped without it, except under CI=true
(see tests/support/browser.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.app import server_process
from tests.support.browser import Dom, foreign, parse, render, require_chromium

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
BROKEN = ("Unable to render", "Failed to load API definition")


def rendered_operations(dom: Dom) -> set[tuple[str, str]]:
    """(METHOD, path) of every operation Swagger UI drew: each summary's method, then its path."""
    operations = set()
    method = None
    for element in dom.elements:
        if "opblock-summary-method" in element.classes:
            method = element.text.upper()
        elif "opblock-summary-path" in element.classes and method:
            path = element.attrs.get("data-path") or element.text.replace("\u200b", "")
            operations.add((method, path))
            method = None
    return operations


@pytest.fixture
def server(city_db: Path, asn_db: Path, tmp_path: Path):
    require_chromium()  # before starting anything
    env = {
        "IPINTEL_GEOIP_CITY_DB": str(city_db),
        "IPINTEL_GEOIP_ASN_DB": str(asn_db),
        "IPINTEL_DATA_DIR": str(tmp_path / "data"),
        "IPINTEL_FEEDS": "off",
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_REPUTATION_URL": "http://127.0.0.1:9/api",
        "IPINTEL_RDAP_BOOTSTRAP_URL": "http://127.0.0.1:9/rdap/",
        "IPINTEL_LOG_LEVEL": "ERROR",
    }
    with server_process(env) as (client, _proc):
        yield client


def test_docs_renders_every_operation_in_chromium(server, tmp_path: Path) -> None:
    document = server.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    expected = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item if method in METHODS
    }
    assert len(expected) >= 10

    def ready(html: str) -> bool:
        return any(text in html for text in BROKEN) or rendered_operations(parse(html)) >= expected

    url = f"{server.base_url}/docs"
    started = time.perf_counter()
    page = render(url, ready=ready, screenshot=tmp_path / "docs.png")
    elapsed = time.perf_counter() - started
    dom = parse(page.dom)

    for text in BROKEN:
        assert text not in page.dom, f"/docs says {text!r}: Swagger UI cannot render the document"
    missing = expected - rendered_operations(dom)
    assert not missing, f"operations not rendered on /docs: {sorted(missing)}"
    assert document["info"]["title"] in dom.by_class("title")[0].text

    # Offline: every script, stylesheet and image comes from the service itself, and so did every request.
    assert dom.loaded_urls(), "no script or stylesheet found in the rendered page"
    assert foreign(dom.loaded_urls(), url) == [], "the page refers to another host"
    assert any(u.endswith("/openapi.json") for u in page.requests), f"net log without the spec: {page.requests}"
    assert foreign(page.requests, url) == [], "the page requested another host"

    assert page.screenshot is not None and page.screenshot.read_bytes().startswith(b"\x89PNG")
    assert elapsed < 300, f"rendering /docs took {elapsed:.0f} s"
