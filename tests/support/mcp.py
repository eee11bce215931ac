"""Talking to ``/mcp`` in tests: JSON-RPC helpers that check every answer's envelope.

``running_app``'s response hook skips ``/mcp`` (its bodies are JSON-RPC, not
``{"data": ...}``); these helpers do the checking instead, so no MCP test can
forget to: every JSON answer must be a valid JSON-RPC response
(``schemas/mcp/response.json``), no answer may carry ``Mcp-Session-Id``
(the server is stateless), and every response has an ``X-Request-Id``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from ipintel.schema_files import load_schema

_RESPONSE = Draft202012Validator(load_schema("mcp/response"))
_ids = itertools.count(1)

# The tools, in the fixed order tools/list gives them (docs/MCP.md#tools).
TOOL_ORDER = [
    "lookup_ip",
    "whois_ip",
    "lookup_dns",
    "check_blacklist",
    "detect_vpn",
    "calculate_cidr",
    "profile_ip",
    "lookup_ips",
    "lookup_asn",
]

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def check_transport(response: httpx.Response) -> None:
    assert "mcp-session-id" not in response.headers, "a stateless server never issues a session"
    assert response.headers.get("x-request-id"), "every response carries X-Request-Id"


def answers_of(response: httpx.Response) -> Any:
    """The JSON-RPC answer(s) of a 200/4xx JSON response, each validated against the response schema."""
    check_transport(response)
    assert response.headers["content-type"].startswith("application/json"), response.headers["content-type"]
    body = json.loads(response.content)
    for answer in body if isinstance(body, list) else [body]:
        _RESPONSE.validate(answer)
    return body


async def post(client: httpx.AsyncClient, payload: Any, *, path: str = "/mcp", **headers: str) -> httpx.Response:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return await client.post(path, content=raw, headers={**JSON_HEADERS, **headers})


async def rpc(client: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request; returns its whole answer (``result`` or ``error``) after checking id and status."""
    id_ = next(_ids)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    response = await post(client, message)
    assert response.status_code == 200, response.text
    answer = answers_of(response)
    assert answer["id"] == id_
    return answer


async def call_tool(client: httpx.AsyncClient, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tools/call that must produce a result (success or ``isError``); checks the result's shape:
    a success's structuredContent is valid against the tool's outputSchema and its text is the same JSON;
    a failure's text is the ``{"error": {code, message}}`` object of docs/API.md#errors."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    answer = await rpc(client, "tools/call", params)
    assert "result" in answer, answer
    result = answer["result"]
    assert result["content"][0]["type"] == "text"
    text = json.loads(result["content"][0]["text"])
    if result["isError"]:
        Draft202012Validator(load_schema("error")).validate(text)
    else:
        schema = (await listed_tools(client))[name]["outputSchema"]
        Draft202012Validator(schema).validate(result["structuredContent"])
        assert text == result["structuredContent"]
    return result


async def listed_tools(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """The server's tools/list, by name (asked once per client)."""
    cached = getattr(client, "_mcp_tools", None)
    if cached is None:
        answer = await rpc(client, "tools/list")
        cached = {tool["name"]: tool for tool in answer["result"]["tools"]}
        client._mcp_tools = cached  # type: ignore[attr-defined]
    return cached


def error_of(result: dict[str, Any]) -> dict[str, str]:
    """The ``{"code", "message"}`` of an ``isError`` result."""
    assert result["isError"] is True, result
    return json.loads(result["content"][0]["text"])["error"]
