"""The MCP Apps extension on ``POST /mcp`` (issue 25, docs/MCP.md#the-profile-card), through ASGI: the
``ui://ipintel/profile`` resource on both eras, the tools that link it and for whom, the negotiation, and
tool results left exactly as they were. The card in a real host is tests/test_mcp_app_browser.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import orjson
import pytest

from ipintel.api.mcp import apps
from ipintel.api.page import ASSETS
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.browser import parse
from tests.support.mcp import TOOL_ORDER, answers_of, rpc
from tests.test_mcp_revision_2026 import META, complete, modern, refused, request, routing, send

URI = "ui://ipintel/profile"
MIME = "text/html;profile=mcp-app"
EXTENSION = {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}
LINKED = ["lookup_ip", "detect_vpn", "profile_ip"]
LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def with_capabilities(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {**META, "io.modelcontextprotocol/clientCapabilities": capabilities}


async def modern_as(
    client: httpx.AsyncClient, method: str, params: dict[str, Any], capabilities: dict[str, Any]
) -> httpx.Response:
    name = params.get("name") if method == "tools/call" else params.get("uri") if method == "resources/read" else None
    return await send(client, request(method, params, meta=with_capabilities(capabilities)), routing(method, name))


def check_resource_meta(meta: dict[str, Any]) -> None:
    """No other origin for anything, a border, and our validator."""
    assert meta["ui"] == {
        "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
        "prefersBorder": True,
    }
    assert meta["ipintel/etag"] == apps.ETAG


# The resource --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2026-07-28", *LEGACY])
async def test_the_card_is_listed_and_read_on_every_revision(settings: Settings, version: str) -> None:
    async with running_app(settings) as client:
        if version == "2026-07-28":
            listed = complete(await modern(client, "resources/list", {}))
            read = complete(await send(client, request("resources/read", {"uri": URI}), routing("resources/read", URI)))
            templates = complete(await modern(client, "resources/templates/list", {}))
            for answer in (listed, read, templates):  # the 2026-07-28 cache hints
                assert answer["ttlMs"] == 3_600_000 and answer["cacheScope"] == "public"
        else:
            hello = await rpc(client, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {}})
            assert hello["result"]["protocolVersion"] == version
            listed = (await rpc(client, "resources/list"))["result"]
            read = (await rpc(client, "resources/read", {"uri": URI}))["result"]
            templates = (await rpc(client, "resources/templates/list"))["result"]
            assert "ttlMs" not in listed and "resultType" not in read
    assert templates["resourceTemplates"] == []
    (entry,) = listed["resources"]
    assert entry["uri"] == URI and entry["mimeType"] == MIME and entry["name"] and entry["description"]
    check_resource_meta(entry["_meta"])
    (contents,) = read["contents"]
    assert contents["uri"] == URI and contents["mimeType"] == MIME
    check_resource_meta(contents["_meta"])
    document = contents["text"].encode("utf-8")
    # The validator is the document's own hash, and the listing's size its size: a host can tell a change.
    assert entry["size"] == len(document) <= 300_000
    assert apps.ETAG == '"' + hashlib.sha256(document).hexdigest()[:32] + '"'


async def test_the_document_is_self_contained_and_shares_the_pages_renderer(settings: Settings) -> None:
    async with running_app(settings) as client:
        text = (await rpc(client, "resources/read", {"uri": URI}))["result"]["contents"][0]["text"]
    assert text.startswith("<!doctype html>")
    dom = parse(text)
    scripts = [e for e in dom.elements if e.tag == "script"]
    assert len(scripts) == 1 and "src" not in scripts[0].attrs  # inlined, nothing fetched
    assert not [e for e in dom.elements if e.tag in ("link", "img", "iframe", "object", "embed", "base")]
    assert not [e for e in dom.elements if any(a.startswith("on") for a in e.attrs)]
    (body,) = [e for e in dom.elements if e.tag == "body"]
    assert body.attrs["data-map"].startswith("data:image/svg+xml;base64,")
    for marker in ("http://", "https://", "//cdn", "@import", "url("):
        # No other host's address anywhere (the SVG namespace is a name, never loaded).
        assert marker not in text.replace("http://www.w3.org/2000/svg", ""), marker
    # One renderer for the page and the card: the page's file, byte for byte, is in the document.
    assert ASSETS["render.js"].body.decode("utf-8") in text
    assert ASSETS["page.css"].body.decode("utf-8") in text


async def test_reading_a_resource_that_does_not_exist_is_a_clear_error(settings: Settings) -> None:
    async with running_app(settings) as client:
        missing = await rpc(client, "resources/read", {"uri": "ui://ipintel/nothing"})
        no_uri = await rpc(client, "resources/read", {})
        wrong_type = await rpc(client, "resources/read", {"uri": 7})
        modern_missing = await send(
            client,
            request("resources/read", {"uri": "ui://other"}),
            routing("resources/read", "ui://other"),
        )
        mismatch = await send(client, request("resources/read", {"uri": URI}), routing("resources/read", "ui://other"))
    assert missing["error"]["code"] == -32002 and URI in missing["error"]["message"]
    assert missing["error"]["data"] == {"uri": "ui://ipintel/nothing"}
    for answer in (no_uri, wrong_type):
        assert answer["error"]["code"] == -32602 and "params.uri" in answer["error"]["message"]
    assert modern_missing.status_code == 200 and answers_of(modern_missing)["error"]["code"] == -32002
    refused(mismatch, 400, -32020)  # Mcp-Name mirrors params.uri on resources/read


# The tools that link it, and for whom ----------------------------------------------------------------------------


async def test_a_2026_client_that_declares_the_extension_sees_the_links(settings: Settings) -> None:
    async with running_app(settings) as client:
        tools = complete(await modern_as(client, "tools/list", {}, {"extensions": EXTENSION}))["tools"]
    assert [t["name"] for t in tools] == TOOL_ORDER
    for tool in tools:
        if tool["name"] in LINKED:
            assert tool["_meta"] == {
                "ui": {"resourceUri": URI, "visibility": ["model", "app"]},
                "ui/resourceUri": URI,  # the deprecated flat key the extension's SDK still writes
            }
        else:
            assert "_meta" not in tool, tool["name"]  # lookup_ips and the rest: no card


@pytest.mark.parametrize(
    "capabilities",
    [
        {},
        {"extensions": {}},
        {"extensions": {"io.modelcontextprotocol/ui": {}}},  # mimeTypes is required by the extension
        {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/uri-list"]}}},
        {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": MIME}}},  # not a list
        {"experimental": EXTENSION},
    ],
)
async def test_a_2026_client_without_the_extension_sees_the_list_as_before(
    settings: Settings, capabilities: dict[str, Any]
) -> None:
    """The extension's rule: a server checks the client's capabilities before offering UI tools. Without them the
    list is byte for byte the list of a client that sends no capabilities at all."""
    async with running_app(settings) as client:
        plain = await modern_as(client, "tools/list", {}, {})
        other = await modern_as(client, "tools/list", {}, capabilities)
    assert plain.content == other.content
    assert not any("_meta" in tool for tool in complete(other)["tools"])


async def test_handshake_clients_see_the_links_and_nothing_else_changes(settings: Settings) -> None:
    """The handshake era: the capabilities travel only in initialize, which this stateless server does not keep, so
    the links are always listed (a client that does not know the extension ignores _meta, as MCP requires). Names,
    schemas and annotations are those a 2026-07-28 client without the extension gets."""
    async with running_app(settings) as client:
        legacy = (await rpc(client, "tools/list"))["result"]["tools"]
        plain = complete(await modern_as(client, "tools/list", {}, {}))["tools"]
    assert [{k: v for k, v in tool.items() if k != "_meta"} for tool in legacy] == plain
    assert [tool["name"] for tool in legacy if "_meta" in tool] == LINKED


async def test_the_server_declares_the_extension_and_the_resources(settings: Settings) -> None:
    async with running_app(settings) as client:
        discovered = complete(await modern(client, "server/discover", {}))
        hello = (await rpc(client, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))["result"]
    for capabilities in (discovered["capabilities"], hello["capabilities"]):
        assert capabilities["extensions"] == EXTENSION
        assert capabilities["resources"] == {"listChanged": False}
        assert capabilities["tools"] == {"listChanged": False}


# Tool results: exactly as before, whoever asks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "rest"),
    [
        ("lookup_ip", {"ip": "8.8.8.8"}, "/ip/8.8.8.8"),
        ("detect_vpn", {"ip": "8.8.8.8"}, "/ip/8.8.8.8/vpn"),
        ("profile_ip", {"ip": "8.8.8.8", "include": ["geo", "vpn"]}, "/ip/8.8.8.8/profile?include=geo,vpn"),
        ("calculate_cidr", {"range": "10.0.0.0/8"}, "/cidr?range=10.0.0.0/8"),
    ],
)
async def test_tool_results_are_the_same_bytes_for_every_client(
    settings: Settings, tool: str, arguments: dict[str, Any], rest: str
) -> None:
    params = {"name": tool, "arguments": arguments}
    async with running_app(settings) as client:
        data = (await client.get(rest)).json()["data"]
        declared = await modern_as(client, "tools/call", params, {"extensions": EXTENSION})
        undeclared = await modern_as(client, "tools/call", params, {})
        legacy = await client.post(
            "/mcp",
            content=json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
    assert declared.content == undeclared.content  # the extension changes no byte of a result
    result = complete(declared)
    # The result is the REST data object, as text (orjson's bytes) and as structuredContent, and nothing more.
    assert result == {
        "content": [{"type": "text", "text": orjson.dumps(data).decode("utf-8")}],
        "structuredContent": data,
        "isError": False,
        "resultType": "complete",
        "_meta": result["_meta"],
    }
    assert list(result["_meta"]) == ["io.modelcontextprotocol/serverInfo"]
    assert answers_of(legacy)["result"] == {
        "content": [{"type": "text", "text": orjson.dumps(data).decode("utf-8")}],
        "structuredContent": data,
        "isError": False,
    }


def test_an_inlined_file_cannot_end_its_element_early() -> None:
    with pytest.raises(ValueError, match="</script"):
        apps._inline_script('const x = "</script><img src=x>";')
    assert apps.client_supports_apps({"extensions": EXTENSION}) is True
    assert apps.client_supports_apps(None) is False and apps.client_supports_apps([EXTENSION]) is False
