"""MCP 2026-07-28 on ``POST /mcp``: every check of that revision with its HTTP status and error code,
the shape of its results, and the handshake era left as it was (docs/MCP.md#versions)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from ipintel.api.mcp.envelope import decode_header_value
from ipintel.schema_files import load_schema
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.mcp import JSON_HEADERS, TOOL_ORDER, answers_of, check_transport, post

MODERN = "2026-07-28"
ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def request(method: str, params: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None) -> dict:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method, "params": dict(params or {})}
    body["params"]["_meta"] = META if meta is None else meta
    return body


def routing(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


async def send(client: httpx.AsyncClient, body: Any, headers: dict[str, str] | list[tuple[str, str]]) -> httpx.Response:
    if isinstance(headers, dict):
        headers = list(headers.items())
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post("/mcp", content=raw, headers=[*JSON_HEADERS.items(), *headers])


async def modern(client: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
    """A well-formed 2026-07-28 request, headers and body agreeing."""
    name = (params or {}).get("name") if method == "tools/call" else None
    return await send(client, request(method, params), routing(method, name))


def refused(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    answer = answers_of(response)
    assert answer["error"]["code"] == code, answer
    return answer["error"]


def complete(response: httpx.Response) -> dict[str, Any]:
    """A 2026-07-28 result: 200, resultType complete, the server's identity in _meta."""
    assert response.status_code == 200, response.text
    result = answers_of(response)["result"]
    assert result["resultType"] == "complete"
    info = result["_meta"][SERVER_INFO]
    assert info["name"] == "ipintel" and isinstance(info["version"], str)
    return result


# server/discover, tools/list, tools/call --------------------------------------------------------------------


async def test_discover_lists_every_version_capabilities_and_caching(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = complete(await modern(client, "server/discover"))
    assert result["supportedVersions"] == ALL_VERSIONS
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {"listChanged": False},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}},
    }
    assert "calculate_cidr" in result["instructions"]
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"


async def test_tools_list_is_cacheable_and_every_tool_has_title_and_annotations(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = complete(await modern(client, "tools/list", {"cursor": "ignored"}))
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert list(tools) == TOOL_ORDER
    for name, tool in tools.items():
        assert tool["title"]
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is True and hints["destructiveHint"] is False and hints["idempotentHint"] is True
        assert hints["openWorldHint"] is (name != "calculate_cidr"), name


async def test_tools_call_answers_a_complete_result_whose_structured_content_fits_its_schema(
    settings: Settings,
) -> None:
    async with running_app(settings) as client:
        tools = {t["name"]: t for t in complete(await modern(client, "tools/list"))["tools"]}
        result = complete(
            await modern(client, "tools/call", {"name": "calculate_cidr", "arguments": {"range": "10.0.0.0/8"}})
        )
    assert result["isError"] is False
    Draft202012Validator(tools["calculate_cidr"]["outputSchema"]).validate(result["structuredContent"])
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


async def test_a_failed_tool_is_a_complete_result_without_structured_content(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = complete(
            await modern(client, "tools/call", {"name": "calculate_cidr", "arguments": {"range": "nope"}})
        )
    assert result["isError"] is True
    assert "structuredContent" not in result
    error = json.loads(result["content"][0]["text"])
    Draft202012Validator(load_schema("error")).validate(error)
    assert error["error"]["code"] == "invalid_range"


async def test_bad_tools_call_params_are_400_invalid_params(settings: Settings) -> None:
    async with running_app(settings) as client:
        error = refused(await modern(client, "tools/call", {"name": "no_such_tool", "arguments": {}}), 400, -32602)
    assert "unknown tool" in error["message"]


# The checks, in the revision's order ------------------------------------------------------------------------


async def test_no_meta_at_all_is_400_invalid_params(settings: Settings) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with running_app(settings) as client:
        error = refused(await send(client, body, routing("tools/list")), 400, -32602)
    assert "io.modelcontextprotocol/protocolVersion" in error["message"]


@pytest.mark.parametrize(
    "missing", ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
async def test_a_missing_meta_key_is_400_invalid_params_naming_it(settings: Settings, missing: str) -> None:
    meta = {key: value for key, value in META.items() if key != missing}
    async with running_app(settings) as client:
        error = refused(await send(client, request("tools/list", meta=meta), routing("tools/list")), 400, -32602)
    assert missing in error["message"]


async def test_missing_meta_keys_are_reported_before_header_mismatches(settings: Settings) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN}
    async with running_app(settings) as client:
        response = await send(client, request("tools/list", meta=meta), routing("tools/call"))
    refused(response, 400, -32602)


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ({"Mcp-Method": "tools/list"}, "MCP-Protocol-Version header is required"),
        ({"MCP-Protocol-Version": MODERN}, "Mcp-Method header is required"),
        (routing("tools/list", version="2025-11-25"), "MCP-Protocol-Version header does not match"),
        (routing("tools/call"), "Mcp-Method header does not match"),
        (routing("tools/List"), "Mcp-Method header does not match"),  # values are case-sensitive
    ],
    ids=["no-version", "no-method", "version-differs", "method-differs", "method-case"],
)
async def test_routing_headers_missing_or_disagreeing_are_400_header_mismatch(
    settings: Settings, headers: dict[str, str], words: str
) -> None:
    async with running_app(settings) as client:
        error = refused(await send(client, request("tools/list"), headers), 400, -32020)
    assert words in error["message"]


CALL = {"name": "calculate_cidr", "arguments": {"range": "10.0.0.0/8"}}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.mark.parametrize(
    "name_header",
    [None, "lookup_ip", "calculate_cidr ", b64("lookup_ip"), "=?base64?Y2FsY3VsYXRlX2NpZHI?=", "=?base64?!!!?="],
    ids=["missing", "other-tool", "trailing-space", "base64-other", "base64-unpadded", "base64-garbage"],
)
async def test_mcp_name_missing_or_disagreeing_is_400_header_mismatch(
    settings: Settings, name_header: str | None
) -> None:
    async with running_app(settings) as client:
        error = refused(
            await send(client, request("tools/call", CALL), routing("tools/call", name_header)), 400, -32020
        )
    assert "Mcp-Name" in error["message"]


async def test_mcp_name_in_base64_is_decoded_before_comparing(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = complete(await send(client, request("tools/call", CALL), routing("tools/call", b64("calculate_cidr"))))
    assert result["isError"] is False


async def test_a_non_ascii_tool_name_must_come_in_base64(settings: Settings) -> None:
    call = {"name": "outil_géo", "arguments": {}}
    async with running_app(settings) as client:
        encoded = await send(client, request("tools/call", call), routing("tools/call", b64("outil_géo")))
    # The headers agree with the body, so the request is answered: an unknown tool.
    assert "unknown tool" in refused(encoded, 400, -32602)["message"]


@pytest.mark.parametrize("header", ["MCP-Protocol-Version", "Mcp-Method"])
async def test_a_routing_header_sent_twice_is_400_header_mismatch(settings: Settings, header: str) -> None:
    headers = [*routing("tools/list").items(), (header, routing("tools/list")[header])]
    async with running_app(settings) as client:
        error = refused(await send(client, request("tools/list"), headers), 400, -32020)
    assert "more than once" in error["message"]


async def test_header_mismatch_is_reported_before_an_unsupported_version(settings: Settings) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    async with running_app(settings) as client:
        refused(await send(client, request("tools/list", meta=meta), routing("tools/list")), 400, -32020)


@pytest.mark.parametrize("version", ["1900-01-01", "2027-01-01", "2025-11-25", "latest"])
async def test_an_unsupported_version_is_400_listing_every_supported_one(settings: Settings, version: str) -> None:
    """2025-11-25 is spoken, but only through initialize: in a 2026-07-28 envelope it is unsupported."""
    meta = {**META, "io.modelcontextprotocol/protocolVersion": version}
    async with running_app(settings) as client:
        error = refused(
            await send(client, request("tools/list", meta=meta), routing("tools/list", version=version)), 400, -32022
        )
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": version}


async def test_a_version_that_is_not_a_string_is_invalid_params_or_a_mismatch(settings: Settings) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": 20260728}
    async with running_app(settings) as client:
        # The header is a string, so it can never agree with a number: the header check comes first.
        refused(
            await send(client, request("tools/list", meta=meta), routing("tools/list", version="20260728")), 400, -32020
        )


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel"])
async def test_methods_the_revision_removed_are_404_method_not_found(settings: Settings, method: str) -> None:
    async with running_app(settings) as client:
        error = refused(await modern(client, method), 404, -32601)
    assert "removed in MCP 2026-07-28" in error["message"]


@pytest.mark.parametrize("method", ["resources/subscribe", "prompts/list", "subscriptions/listen", "x"])
async def test_other_methods_are_404_method_not_found(settings: Settings, method: str) -> None:
    async with running_app(settings) as client:
        error = refused(await modern(client, method), 404, -32601)
    assert "server/discover" in error["message"]


async def test_prompts_get_has_its_mcp_name_checked_before_the_method_is_refused(settings: Settings) -> None:
    body = request("prompts/get", {"name": "p"})
    async with running_app(settings) as client:
        refused(await send(client, body, routing("prompts/get")), 400, -32020)
        refused(await send(client, body, routing("prompts/get", "p")), 404, -32601)


async def test_a_batch_is_400_invalid_request(settings: Settings) -> None:
    async with running_app(settings) as client:
        error = refused(await send(client, [request("tools/list")], routing("tools/list")), 400, -32600)
        # An array whose entries carry a 2026-07-28 _meta is refused even without the header.
        refused(await send(client, [request("tools/list"), request("tools/list")], {}), 400, -32600)
    assert "batches were removed" in error["message"]


async def test_a_posted_response_is_400_invalid_request(settings: Settings) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "result": {}}
    async with running_app(settings) as client:
        refused(await send(client, body, {"MCP-Protocol-Version": MODERN}), 400, -32600)


@pytest.mark.parametrize("raw", [b"{", b"", b"[1,"])
async def test_a_body_that_is_not_json_is_400_parse_error(settings: Settings, raw: bytes) -> None:
    async with running_app(settings) as client:
        refused(await send(client, raw, routing("tools/list")), 400, -32700)


async def test_an_invalid_envelope_is_400_invalid_request(settings: Settings) -> None:
    body = {**request("tools/list"), "id": None}
    async with running_app(settings) as client:
        refused(await send(client, body, routing("tools/list")), 400, -32600)


async def test_a_notification_is_accepted_with_202_and_no_body(settings: Settings) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META, "requestId": 1}}
    async with running_app(settings) as client:
        response = await send(client, body, routing("notifications/cancelled"))
    assert response.status_code == 202 and response.content == b""
    check_transport(response)


async def test_a_notification_naming_an_unknown_version_is_400(settings: Settings) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    async with running_app(settings) as client:
        refused(await send(client, body, {"MCP-Protocol-Version": "1900-01-01"}), 400, -32022)


# The handshake era, and which era a request belongs to ------------------------------------------------------


@pytest.mark.parametrize("header", ["nonsense", "2026-07-29", "2025-11-25 ", ""])
async def test_a_handshake_request_with_an_unknown_version_header_is_400(settings: Settings, header: str) -> None:
    """An older client's request (no _meta) with a version header we do not speak: -32022 and every version."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with running_app(settings) as client:
        error = refused(await send(client, body, {"MCP-Protocol-Version": header}), 400, -32022)
    assert error["data"]["supported"] == ALL_VERSIONS


@pytest.mark.parametrize("header", [None, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_handshake_era_results_are_as_before(settings: Settings, header: str | None) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL}
    async with running_app(settings) as client:
        response = await send(client, body, {"MCP-Protocol-Version": header} if header else {})
        discover = await send(client, {"jsonrpc": "2.0", "id": 2, "method": "server/discover"}, {})
    assert response.status_code == 200
    result = answers_of(response)["result"]
    assert "resultType" not in result and "_meta" not in result
    assert result["structuredContent"]["usableHosts"] == 2**24 - 2
    # server/discover without a 2026-07-28 envelope is a handshake-era request, answered as before.
    assert discover.status_code == 200 and answers_of(discover)["error"]["code"] == -32601


async def test_handshake_era_errors_keep_http_200(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, b"{")
        unknown = await post(client, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
    assert response.status_code == 200 and answers_of(response)["error"]["code"] == -32700
    assert unknown.status_code == 200 and answers_of(unknown)["error"]["code"] == -32602


async def test_a_meta_version_makes_a_request_2026_07_28_whatever_its_header(settings: Settings) -> None:
    """_meta names the revision: the body wins the era, and a missing header is then a mismatch."""
    async with running_app(settings) as client:
        refused(await send(client, request("tools/list"), {}), 400, -32020)


async def test_the_preflight_allows_the_2026_headers(settings: Settings) -> None:
    headers = {
        "Origin": "http://localhost:6274",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region",
    }
    async with running_app(settings) as client:
        response = await client.options("/mcp", headers=headers)
    assert response.status_code == 204
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-region"} <= allowed


def test_header_values_decode_only_canonical_base64_of_utf8() -> None:
    assert decode_header_value("plain value") == "plain value"
    assert decode_header_value(b64("Hello, 世界")) == "Hello, 世界"
    assert decode_header_value(b64("=?base64?literal?=")) == "=?base64?literal?="
    assert decode_header_value("=?base64?SGVsbG8=?=") == "Hello"
    assert decode_header_value("=?base64?SGVsbG9=?=") is None  # non-zero trailing bits: not canonical
    assert decode_header_value("=?base64?/w==?=") is None  # not UTF-8
    assert decode_header_value("tab\tinside") is None  # a control character must be sent in base64
    assert decode_header_value("line\n") is None


@pytest.mark.parametrize("version", [None, "2025-06-18", "2024-11-05"])
async def test_routing_headers_that_disagree_with_an_older_body_are_refused(
    settings: Settings, version: str | None
) -> None:
    """Issue 23, point 7: with an older version header (or none) the headers were not checked, so a request
    could name one tool in Mcp-Name (what a gateway routes or limits on) and call another in the body."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "whois_ip", "arguments": {"ip": "8.8.8.8"}},
    }
    version_header = {"MCP-Protocol-Version": version} if version else {}
    async with running_app(settings) as client:
        for headers in (
            {"Mcp-Method": "tools/call", "Mcp-Name": "calculate_cidr"},  # the cheap tool in the header
            {"Mcp-Method": "tools/list"},
            {"Mcp-Name": "=?base64?d2hvaXNfaXA?="},  # not canonical base64
        ):
            response = await post(client, call, **version_header, **headers)
            assert response.status_code == 400, (headers, response.text)
            assert response.json()["error"]["code"] == -32020
        batch = [call, {**call, "id": 8, "params": {"name": "calculate_cidr", "arguments": {"range": "10.0.0.0/8"}}}]
        refused = await post(
            client, batch, **version_header, **{"Mcp-Method": "tools/call", "Mcp-Name": "calculate_cidr"}
        )
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020
        # Headers that agree, or none at all, are answered as before.
        agreeing = await post(client, call, **version_header, **{"Mcp-Method": "tools/call", "Mcp-Name": "whois_ip"})
        assert agreeing.status_code == 200 and "result" in agreeing.json()
        assert (await post(client, call, **version_header)).status_code == 200
