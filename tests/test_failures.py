"""Issue 24, point 1: every refusal and failure is answered in one place, the request middleware, which alone
chooses a REST error body or, on the paths of ``/mcp``, a JSON-RPC error (docs/API.md#errors, docs/MCP.md)."""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

import httpx

from ipintel.errors import STATUS_BY_CODE
from ipintel.settings import Settings
from tests.support.app import running_app

KEY = secrets.token_urlsafe(32)
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def assert_rest_failure(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json() == {"error": {"code": code, "message": answer.json()["error"]["message"]}}
    assert STATUS_BY_CODE[code] == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff" and answer.headers["x-request-id"]


def assert_rpc_failure(answer: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32000
    assert body["error"]["data"] == {"httpStatus": status, "code": code}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert answer.headers["x-content-type-options"] == "nosniff" and answer.headers["x-request-id"]
    return body


async def test_every_refusal_of_the_mcp_endpoint_is_a_json_rpc_error_with_its_status_and_code(
    settings: Settings, tmp_path: Path
) -> None:
    guarded = settings.replace(max_body_bytes=1024, allowed_hosts=("ipintel.test",))
    async with running_app(guarded) as client:
        for path in ("/mcp", "/mcp/"):
            assert_rpc_failure(await client.get(path), 405, "method_not_allowed")
        refused = await client.get("/mcp")
        assert refused.headers["allow"] == "POST"
        assert_rpc_failure(
            await client.post("/mcp", content=b"{}", headers={"Content-Type": "text/plain"}),
            415,
            "unsupported_media_type",
        )
        big = await client.post(
            "/mcp", content=b"[" + b"1," * 2000 + b"1]", headers={"Content-Type": "application/json"}
        )
        assert_rpc_failure(big, 413, "payload_too_large")
        evil = await client.post("/mcp", json=PING, headers={"Origin": "https://evil.example"})
        assert_rpc_failure(evil, 403, "origin_not_allowed")
        assert "access-control-allow-origin" not in evil.headers and evil.headers["vary"] == "Origin"
        assert_rpc_failure(
            await client.post("/mcp", json=PING, headers={"Host": "evil.example"}), 421, "misdirected_request"
        )
    async with running_app(settings.replace(rate_limits={"general": 1, "dns": 30, "registry": 10})) as client:
        assert (await client.post("/mcp", json=PING)).status_code == 200
        spent = await client.post("/mcp", json=PING)
        assert_rpc_failure(spent, 429, "rate_limited")
        assert int(spent.headers["retry-after"]) >= 1 and spent.headers["ratelimit-remaining"] == "0"
    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice sha256:{hashlib.sha256(KEY.encode()).hexdigest()}\n")
    async with running_app(settings.replace(api_keys_file=keys)) as client:
        unauthorized = await client.post("/mcp", json=PING)
        assert_rpc_failure(unauthorized, 401, "unauthorized")
        assert unauthorized.headers["www-authenticate"] == 'Bearer realm="ipintel"'


async def test_every_other_failure_is_the_one_rest_error_body(settings: Settings, tmp_path: Path) -> None:
    async with running_app(settings) as client:
        assert_rest_failure(await client.get("/nowhere"), 404, "not_found")
        assert_rest_failure(await client.get("/mcp/nowhere"), 404, "not_found")  # not a path of the endpoint
        assert_rest_failure(await client.get("/page/nothing.js"), 404, "not_found")  # the page's own files
        batch_get = await client.get("/ip/batch")
        assert_rest_failure(batch_get, 405, "method_not_allowed")
        assert batch_get.headers["allow"] == "POST"
        assert_rest_failure(await client.get("/ip/10.0.0.1"), 422, "reserved_address")  # a handler's ApiError
        form = await client.post("/ip/batch", content=b"ips=8.8.8.8", headers={"Content-Type": "text/plain"})
        assert_rest_failure(form, 415, "unsupported_media_type")
        broken = await client.post("/ip/batch", content=b'{"ips": [', headers={"Content-Type": "application/json"})
        assert_rest_failure(broken, 400, "invalid_request")
        assert broken.json()["error"]["message"].startswith("the body is not valid JSON at line 1")
        head = await client.head("/ip/10.0.0.1")
        assert head.status_code == 422 and head.content == b""  # HEAD: the status and headers, no body
    async with running_app(settings.replace(geoip_city_db=tmp_path / "missing.mmdb")) as client:
        assert_rest_failure(await client.get("/readyz"), 503, "geoip_unavailable")


async def test_a_json_body_that_does_not_parse_is_a_parse_error_on_the_mcp_endpoint(settings: Settings) -> None:
    async with running_app(settings) as client:
        answer = await client.post("/mcp", content=b'{"jsonrpc": ', headers={"Content-Type": "application/json"})
    assert answer.status_code == 200  # the handshake era: JSON-RPC errors travel with 200
    error = answer.json()["error"]
    assert error["code"] == -32700 and error["message"].startswith("the body is not valid JSON at line 1 column")


def test_the_error_schema_lists_exactly_the_codes_of_the_error_table() -> None:
    from ipintel.schema_files import load_schema

    enum = load_schema("error")["properties"]["error"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(STATUS_BY_CODE)
