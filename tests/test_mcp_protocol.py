"""The JSON-RPC and transport rules of ``POST /mcp``, rule by rule of docs/MCP.md, through the ASGI app."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest

from ipintel.addresses import IPAddress
from ipintel.api.mcp.protocol import MAX_BATCH
from ipintel.api.mcp.transport import OriginPolicy
from ipintel.capabilities.asn import AsnInfo
from ipintel.service import Intel
from ipintel.settings import Settings
from ipintel.web.body import DRAIN_BYTES
from tests.support.app import running_app
from tests.support.mcp import JSON_HEADERS, answers_of, call_tool, check_transport, error_of, post, rpc

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# initialize -----------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_initialize_answers_a_supported_version_with_itself(settings: Settings, version: str) -> None:
    async with running_app(settings) as client:
        answer = await rpc(
            client,
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
        )
    result = answer["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {"listChanged": False},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}},
    }
    assert result["serverInfo"]["name"] == "ipintel" and result["serverInfo"]["version"]
    assert isinstance(result["instructions"], str) and "calculate_cidr" in result["instructions"]


@pytest.mark.parametrize(
    "params", [{"protocolVersion": "1999-01-01"}, {"protocolVersion": 20250326}, {}, {"protocolVersion": "2026-07-28"}]
)
async def test_initialize_with_an_unknown_or_missing_version_gets_the_newest_legacy_one(
    settings: Settings, params: dict
) -> None:
    async with running_app(settings) as client:
        answer = await rpc(client, "initialize", params)
    assert answer["result"]["protocolVersion"] == "2025-11-25"


async def test_initialize_issues_no_session(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert response.status_code == 200
    check_transport(response)  # no Mcp-Session-Id


# notifications and responses: 202 -------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        INITIALIZED,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "method": "no/such/notification"},
        [INITIALIZED, {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}],
        {"jsonrpc": "2.0", "id": 9, "result": {}},  # a client's answer to a server request
        {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "nope"}},
        [INITIALIZED, {"jsonrpc": "2.0", "id": 9, "result": {"roots": []}}],
    ],
    ids=["initialized", "cancelled", "unknown-notification", "notification-batch", "result", "error", "mixed"],
)
async def test_only_notifications_and_responses_get_202_and_no_body(settings: Settings, body: object) -> None:
    async with running_app(settings) as client:
        response = await post(client, body)
    assert response.status_code == 202
    assert response.content == b""
    check_transport(response)


# ping, tools/* without initialize ----------------------------------------------------------


async def test_ping_answers_an_empty_result_with_the_same_id(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, {"jsonrpc": "2.0", "id": "abc", "method": "ping"})
    assert answers_of(response) == {"jsonrpc": "2.0", "id": "abc", "result": {}}


async def test_tools_work_without_initialize(settings: Settings) -> None:
    async with running_app(settings) as client:
        listing = await rpc(client, "tools/list")
        result = await call_tool(client, "calculate_cidr", {"range": "10.0.0.0/8"})
    assert listing["result"]["tools"]
    assert result["structuredContent"]["usableHosts"] == 2**24 - 2


# other methods: -32601 with HTTP 200 --------------------------------------------------------------


@pytest.mark.parametrize("method", ["server/discover", "resources/subscribe", "prompts/list", "logging/setLevel", "x"])
async def test_other_methods_are_method_not_found(settings: Settings, method: str) -> None:
    async with running_app(settings) as client:
        answer = await rpc(client, method, {})
    assert answer["error"]["code"] == -32601
    assert method in answer["error"]["message"]


# tools/call protocol errors: -32602 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"name": "no_such_tool", "arguments": {}}, "unknown tool"),
        ({"arguments": {"range": "10.0.0.0/8"}}, "params.name"),
        ({"name": 7}, "params.name"),
        ({"name": "calculate_cidr", "arguments": ["10.0.0.0/8"]}, "must be an object"),
        ({"name": "calculate_cidr", "arguments": "range=10.0.0.0/8"}, "must be an object"),
    ],
    ids=["unknown-tool", "missing-name", "name-not-string", "arguments-array", "arguments-string"],
)
async def test_tools_call_with_unusable_params_is_invalid_params(settings: Settings, params: dict, words: str) -> None:
    async with running_app(settings) as client:
        answer = await rpc(client, "tools/call", params)
    assert answer["error"]["code"] == -32602
    assert words in answer["error"]["message"]


async def test_params_that_are_not_an_object_are_invalid_params(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1, 2]})
    assert answers_of(response)["error"]["code"] == -32602


async def test_an_unknown_tool_name_is_not_echoed_in_full(settings: Settings) -> None:
    async with running_app(settings) as client:
        answer = await rpc(client, "tools/call", {"name": "x" * 10_000})
    assert answer["error"]["code"] == -32602
    assert len(answer["error"]["message"]) < 500


# body not JSON: -32700 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
        b"\xff\xfe\x00garbage",
        b"NaN",
        b'{"jsonrpc": "2.0", "id": Infinity, "method": "ping"}',
        b"1" * 5000,
    ],
    ids=["broken", "empty", "truncated", "not-utf8", "nan", "infinity", "huge-integer"],
)
async def test_a_body_that_is_not_json_is_a_parse_error(settings: Settings, raw: bytes) -> None:
    async with running_app(settings) as client:
        response = await post(client, raw)
    assert response.status_code == 200
    answer = answers_of(response)
    assert answer["id"] is None and answer["error"]["code"] == -32700


@pytest.mark.parametrize("depth", [100_000, 950])
async def test_deeply_nested_json_is_an_error_not_a_crash(settings: Settings, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    message = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup_ip", "arguments": {"ip": '
        + nested
        + b"}}}"
    )
    async with running_app(settings) as client:
        bare = await post(client, nested)
        inside = await post(client, message)
    assert bare.status_code == 200
    # Past the parser's depth the body is -32700; within it (orjson parses 950 levels) it is a batch
    # whose one entry is not a message: -32600. Either way an error, never a crash.
    bare_answer = answers_of(bare)
    for entry in bare_answer if isinstance(bare_answer, list) else [bare_answer]:
        assert entry["error"]["code"] in (-32700, -32600)
    assert inside.status_code == 200
    answer = answers_of(inside)
    if "error" in answer:
        assert answer["error"]["code"] in (-32700, -32600)
    else:  # the nesting fitted: then the argument is simply the wrong type
        assert error_of(answer["result"])["code"] == "invalid_ip"


# invalid envelope: -32600 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "echoed_id", "words"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1, '"jsonrpc": "2.0"'),
        ({"id": 2, "method": "ping"}, 2, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 3, "method": 42}, 3, "method"),
        ({"jsonrpc": "2.0", "id": 4, "method": ""}, 4, "method"),
        ({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": "x"}, 5, "params"),
        ({"jsonrpc": "2.0", "id": 6, "method": "ping", "extra": 1}, 6, "extra"),
        ({"jsonrpc": "2.0", "method": 42}, None, "method"),  # a malformed notification is answered
        ({"jsonrpc": "2.0", "id": 7, "result": {}, "error": {"code": 1, "message": "x"}}, None, "response"),
        ({"jsonrpc": "2.0", "id": 8}, None, "neither"),
        ([1, 2], None, "object"),
        ("ping", None, "object"),
        (None, None, "object"),
    ],
)
async def test_an_invalid_envelope_is_an_invalid_request(
    settings: Settings, message: object, echoed_id: object, words: str
) -> None:
    async with running_app(settings) as client:
        response = await post(client, message)
    assert response.status_code == 200
    body = answers_of(response)
    answer = body[0] if isinstance(body, list) else body
    assert answer["error"]["code"] == -32600, answer
    assert answer["id"] == echoed_id
    assert words in answer["error"]["message"]


async def test_a_missing_id_makes_a_notification_which_is_not_answered(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, {"jsonrpc": "2.0", "method": "tools/list"})
    assert response.status_code == 202 and response.content == b""


# batches --------------------------------------------------------------------------------------------------


async def test_an_empty_batch_is_one_invalid_request(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, [])
    answer = answers_of(response)
    assert isinstance(answer, dict) and answer["error"]["code"] == -32600 and answer["id"] is None


async def test_a_batch_over_the_limit_is_one_invalid_request_that_says_why(settings: Settings) -> None:
    batch = [{**PING, "id": i} for i in range(MAX_BATCH + 1)]
    async with running_app(settings) as client:
        response = await post(client, batch)
    answer = answers_of(response)
    assert isinstance(answer, dict) and answer["error"]["code"] == -32600
    assert str(MAX_BATCH) in answer["error"]["message"]


async def test_a_full_batch_is_answered_in_order(settings: Settings) -> None:
    assert MAX_BATCH == 20
    batch = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "calculate_cidr", "arguments": {"range": f"10.0.0.0/{i + 8}"}},
        }
        for i in range(MAX_BATCH)
    ]
    async with running_app(settings) as client:
        response = await post(client, batch)
    answers = answers_of(response)
    assert [a["id"] for a in answers] == list(range(MAX_BATCH))
    assert [a["result"]["structuredContent"]["prefixLength"] for a in answers] == [i + 8 for i in range(MAX_BATCH)]


async def test_a_mixed_batch_answers_requests_and_bad_entries_only(settings: Settings) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        INITIALIZED,  # notification: no answer
        {"jsonrpc": "2.0", "id": 5, "result": {}},  # response: no answer
        {"jsonrpc": "2.0", "id": None, "method": "ping"},  # invalid: answered with id null
        {"jsonrpc": "2.0", "id": "b", "method": "prompts/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "calculate_cidr", "arguments": {}}},
        17,  # not an object
    ]
    async with running_app(settings) as client:
        response = await post(client, batch)
    answers = answers_of(response)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        ("a", None),
        (None, -32600),
        ("b", -32601),
        ("c", None),
        (None, -32600),
    ]
    assert answers[0]["result"] == {}
    assert error_of(answers[3]["result"])["code"] == "invalid_range"


# HTTP methods, paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_methods_other_than_post_are_405_with_allow_post(settings: Settings, method: str) -> None:
    async with running_app(settings) as client:
        response = await client.request(method, "/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert answers_of(response)["error"]["code"] == -32000


async def test_mcp_with_a_trailing_slash_answers_without_redirect(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, PING, path="/mcp/")
    assert response.status_code == 200
    assert answers_of(response)["result"] == {}


# Origin and CORS ---------------------------------------------------------------------------------------------


async def test_preflight_from_an_allowed_origin_is_204_with_cors_headers(settings: Settings) -> None:
    headers = {
        "Origin": "http://localhost:6274",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, mcp-protocol-version",
    }
    async with running_app(settings) as client:
        response = await client.options("/mcp", headers=headers)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "http://localhost:6274"
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "accept", "mcp-protocol-version", "mcp-session-id"} <= allowed
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "origin" in response.headers["vary"].lower()


@pytest.mark.parametrize("method", ["OPTIONS", "POST"])
async def test_an_origin_that_is_not_allowed_is_403(settings: Settings, method: str) -> None:
    async with running_app(settings) as client:
        response = await client.request(
            method, "/mcp", content=json.dumps(PING), headers={**JSON_HEADERS, "Origin": "https://evil.example"}
        )
    assert response.status_code == 403
    assert answers_of(response)["error"]["code"] == -32000
    assert "access-control-allow-origin" not in response.headers


async def test_an_allowed_origin_gets_its_answer_with_cors_headers(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, PING, Origin="http://127.0.0.1:3000")
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"


async def test_configured_origins_replace_the_defaults(settings: Settings) -> None:
    settings = settings.replace(mcp_allowed_origins=("https://app.example",))
    async with running_app(settings) as client:
        ok = await post(client, PING, Origin="https://app.example")
        local = await post(client, PING, Origin="http://localhost:3000")
        none = await post(client, PING)
    assert ok.status_code == 200 and local.status_code == 403 and none.status_code == 200


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:3000", True),
        ("http://localhost", True),
        ("HTTP://LOCALHOST:8080", True),
        ("http://127.0.0.1:6274", True),
        ("https://localhost:3000", False),
        ("http://localhost.evil.example:3000", False),
        ("http://evil.example/http://localhost:1", False),
        ("http://localhost:3000.evil.example", False),
        ("null", False),
        ("", False),
    ],
)
def test_origin_patterns_wildcard_only_the_port(origin: str, allowed: bool) -> None:
    assert OriginPolicy(("http://localhost:*", "http://127.0.0.1:*")).allows(origin) is allowed


def test_a_star_pattern_allows_every_origin() -> None:
    assert OriginPolicy(("*",)).allows("https://anything.example")


# media types and body size ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", None])
async def test_a_body_that_is_not_application_json_is_415(settings: Settings, content_type: str | None) -> None:
    headers = {"Accept": "application/json"}
    async with running_app(settings) as client:
        request = client.build_request("POST", "/mcp", content=json.dumps(PING), headers=headers)
        if content_type is None:
            request.headers.pop("content-type", None)
        else:
            request.headers["content-type"] = content_type
        response = await client.send(request)
    assert response.status_code == 415
    assert answers_of(response)["error"]["code"] == -32000


async def test_application_json_with_a_charset_is_accepted(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await post(client, PING, **{"Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 200


async def test_a_body_over_the_limit_is_413(settings: Settings) -> None:
    settings = settings.replace(max_body_bytes=4096)
    padding = "x" * 5000
    async with running_app(settings) as client:
        response = await post(client, {**PING, "params": {"pad": padding}})
        at_limit = await post(client, b" " * (4096 - len(json.dumps(PING))) + json.dumps(PING).encode())
    assert response.status_code == 413
    assert answers_of(response)["error"]["code"] == -32000
    assert at_limit.status_code == 200


async def test_a_streamed_body_is_refused_once_it_passes_the_limit_and_not_read_to_its_end(
    settings: Settings,
) -> None:
    """No Content-Length: the server counts bytes as they arrive, keeps none past the limit, and drops at
    most a bounded drain more (so that the client can read the 413) instead of reading all 50 MiB."""
    settings = settings.replace(max_body_bytes=64 * 1024)
    sent = 0
    chunk = b"[" + b"0," * 4096

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        while sent < 50 * 1024 * 1024:  # 50 MiB: far more than anyone should read
            sent += len(chunk)
            yield chunk

    async with running_app(settings) as client:
        response = await client.post("/mcp", content=endless(), headers=JSON_HEADERS)
    assert response.status_code == 413
    assert answers_of(response)["error"]["code"] == -32000
    assert sent <= 64 * 1024 + DRAIN_BYTES + 2 * len(chunk), f"the server read {sent} bytes of a 50 MiB body"


async def test_a_declared_length_far_over_the_limit_is_refused_before_reading(settings: Settings) -> None:
    settings = settings.replace(max_body_bytes=4096)
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(1000):
            sent += 8192
            yield b" " * 8192

    async with running_app(settings) as client:
        request = client.build_request("POST", "/mcp", content=body(), headers=JSON_HEADERS)
        request.headers["content-length"] = str(4096 + DRAIN_BYTES + 1)
        response = await client.send(request)
    assert response.status_code == 413
    assert sent <= 8192, f"the server read {sent} bytes of a body it had already refused"


# Accept: SSE only for clients that accept nothing else -------------------------------------------------------------


@pytest.mark.parametrize(
    "accept", ["text/event-stream", "application/json;q=0, text/event-stream", "TEXT/EVENT-STREAM"]
)
async def test_a_client_that_accepts_only_event_streams_gets_one_sse_event(settings: Settings, accept: str) -> None:
    async with running_app(settings) as client:
        response = await post(client, PING, Accept=accept)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    check_transport(response)
    text = response.text
    assert text.startswith("event: message\ndata: ") and text.endswith("\n\n")
    assert text.count("data: ") == 1
    assert json.loads(text.split("data: ", 1)[1]) == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    "accept", ["application/json, text/event-stream", "application/json", "*/*", "", "text/html", "application/*"]
)
async def test_any_other_accept_gets_json(settings: Settings, accept: str) -> None:
    async with running_app(settings) as client:
        response = await post(client, PING, Accept=accept)
    assert response.status_code == 200
    assert answers_of(response)["result"] == {}


async def test_sse_framing_applies_to_errors_and_202_stays_empty(settings: Settings) -> None:
    async with running_app(settings) as client:
        broken = await post(client, b"{", Accept="text/event-stream")
        notification = await post(client, INITIALIZED, Accept="text/event-stream")
    assert broken.headers["content-type"].startswith("text/event-stream")
    assert json.loads(broken.text.split("data: ", 1)[1])["error"]["code"] == -32700
    assert notification.status_code == 202 and notification.content == b""


# unexpected exception: -32603 without a trace ------------------------------------------------------------------------


class _BrokenAsnSource:
    """An ASN source with a bug (the far side of the ASN seam): the answer must be -32603, no trace."""

    async def lookup(self, ip: IPAddress) -> AsnInfo | None:
        raise RuntimeError("secret internal detail")


async def test_a_bug_is_an_internal_error_without_trace(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    intel = Intel.from_settings(settings)
    intel.asn_source = _BrokenAsnSource()
    caplog.set_level(logging.ERROR)
    async with running_app(settings, intel=intel) as client:
        response = await post(
            client,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "lookup_ip", "arguments": {"ip": "8.8.8.8"}},
            },
            **{"X-Request-Id": "mcp-bug-1"},
        )
    assert response.status_code == 200
    answer = answers_of(response)
    assert answer["id"] == 1 and answer["error"]["code"] == -32603
    assert "secret" not in response.text and "Traceback" not in response.text
    assert answer["error"]["data"]["requestId"] == "mcp-bug-1"
    assert any(getattr(r, "request_id", None) == "mcp-bug-1" for r in caplog.records)


# OpenAPI ------------------------------------------------------------------------------------------------------------------


async def test_openapi_documents_the_mcp_endpoint(settings: Settings) -> None:
    from openapi_spec_validator import validate

    async with running_app(settings) as client:
        document = (await client.get("/openapi.json")).json()
    validate(document)
    operation = document["paths"]["/mcp"]["post"]
    assert {"200", "202", "403", "405", "413", "415", "429"} <= set(operation["responses"])
    assert operation["requestBody"]["content"]["application/json"]["schema"]
    assert "McpRequest" in document["components"]["schemas"]
