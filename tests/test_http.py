"""The HTTP surface shared by every route: error model, request ids, ops routes, OpenAPI."""

from __future__ import annotations

import json
import logging

import pytest

from ipintel.addresses import IPAddress
from ipintel.capabilities.asn import AsnInfo
from ipintel.service import Intel
from ipintel.settings import Settings
from tests.support.app import running_app, server_process


async def test_unknown_route_is_json_404(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.get("/nope/nothing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_wrong_method_is_json_405_with_allow(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.post("/ip/8.8.8.8")
        delete = await client.delete("/cidr?range=10.0.0.0/8")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in response.headers["allow"]
    assert delete.status_code == 405


async def test_request_id_kept_when_sane_and_replaced_when_not(settings: Settings) -> None:
    async with running_app(settings) as client:
        kept = await client.get("/healthz", headers={"X-Request-Id": "abc-123.def"})
        replaced = await client.get("/healthz", headers={"X-Request-Id": "bad id\twith spaces"})
        too_long = await client.get("/healthz", headers={"X-Request-Id": "a" * 500})
        generated = await client.get("/nope")
    assert kept.headers["x-request-id"] == "abc-123.def"
    assert replaced.headers["x-request-id"] != "bad id\twith spaces"
    assert len(too_long.headers["x-request-id"]) <= 128
    assert len(generated.headers["x-request-id"]) >= 16


async def test_request_id_with_a_trailing_newline_is_replaced_like_one_with_a_trailing_space(
    settings: Settings,
) -> None:
    # Python's "$" also matches before a final "\n": "abc\n" once passed as sane and was echoed back.
    async with running_app(settings) as client:
        answers = {
            suffix: await client.get("/healthz", headers=[(b"X-Request-Id", b"abc" + suffix)])
            for suffix in (b" ", b"\n")
        }
    for suffix, response in answers.items():
        assert response.headers["x-request-id"] not in ("abc", "abc ", "abc\n"), suffix
        assert len(response.headers["x-request-id"]) >= 16, suffix


class _BrokenAsnSource:
    """An ASN source with a bug: the service must answer 500 JSON, not a trace."""

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        raise RuntimeError("secret internal detail")


async def test_a_bug_is_a_json_500_without_trace(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    settings = settings.replace(rate_limits={"general": 60, "dns": 30, "registry": 10})
    intel = Intel.from_settings(settings)
    intel.asn_source = _BrokenAsnSource()
    caplog.set_level(logging.ERROR)
    async with running_app(settings, intel=intel) as client:
        response = await client.get("/ip/8.8.8.8", headers={"X-Request-Id": "trace-me"})
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["code"] == "internal_error"
    assert "secret" not in response.text and "Traceback" not in response.text
    assert response.headers["x-request-id"] == "trace-me"
    assert response.headers["ratelimit-policy"] == "60;w=60"  # the token was spent: it is still reported
    assert any(getattr(r, "request_id", None) == "trace-me" for r in caplog.records)


async def test_health_and_readiness(settings: Settings) -> None:
    async with running_app(settings) as client:
        alive = await client.get("/healthz")
        ready = await client.get("/readyz")
    assert alive.json() == {"data": {"status": "ok"}}
    assert ready.status_code == 200
    assert ready.json()["data"]["checks"]["geoip_city"]["status"] == "ok"


async def test_openapi_document_is_valid_and_complete(settings: Settings) -> None:
    from openapi_spec_validator import validate  # here: 0.4 s to import, for this test alone

    async with running_app(settings) as client:
        response = await client.get("/openapi.json")
    document = response.json()
    validate(document)  # openapi-spec-validator: OpenAPI 3.1
    assert document["openapi"].startswith("3.1")
    app = client.app
    from ipintel.app import ENDPOINTS

    for endpoint in ENDPOINTS:
        operation = document["paths"][endpoint.path][endpoint.method.lower()]
        assert "200" in operation["responses"]
        if endpoint.quota:
            assert "429" in operation["responses"]
            assert "RateLimit-Limit" in operation["responses"]["200"]["headers"]
    assert app.state.openapi is not None
    for name in ("geoip", "cidr", "Error"):
        assert name in document["components"]["schemas"]


async def test_docs_page_is_served_without_a_cdn(settings: Settings) -> None:
    async with running_app(settings) as client:
        page = await client.get("/docs")
        bundle = await client.get("/docs/assets/swagger-ui-bundle.js")
        init = await client.get("/docs/init.js")
        missing_asset = await client.get("/docs/assets/nope.js")
    assert page.status_code == 200 and "swagger-ui" in page.text
    assert "http://" not in page.text and "https://" not in page.text
    assert bundle.status_code == 200 and len(bundle.content) > 100_000
    assert "/openapi.json" in init.text
    assert missing_asset.status_code == 404
    assert missing_asset.json()["error"]["code"] == "not_found"


def test_real_server_end_to_end(city_db) -> None:
    """The real process: hypercorn, env settings, JSON logs with request ids."""
    env = {
        "IPINTEL_GEOIP_CITY_DB": str(city_db),
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_DNS_TIMEOUT": "0.5",
    }
    with server_process(env) as (client, proc):
        record = client.get("/ip/8.8.8.8", headers={"X-Request-Id": "e2e-1"})
        cidr = client.get("/cidr", params={"range": "10.0.0.0/8"})
        missing = client.get("/missing")
    assert record.status_code == 200
    assert record.json()["data"]["timezone"] == "America/Los_Angeles"
    assert record.headers["x-request-id"] == "e2e-1"
    assert cidr.json()["data"]["usableHosts"] == 2**24 - 2
    assert missing.status_code == 404
    output = proc.stdout.read().decode() if proc.stdout else ""
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("request_id") == "e2e-1"]
    assert access and access[0]["route"] == "/ip/{ip}" and access[0]["status"] == 200
    assert all("8.8.8.8" not in json.dumps(line) for line in access), "the looked-up address must not be logged"


async def test_trailing_slash_is_json_404_not_a_redirect(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.get("/ip/8.8.8.8/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
