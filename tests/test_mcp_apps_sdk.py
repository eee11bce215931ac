"""The MCP Apps card with the official SDK clients against the real server process (issue 25): the Python SDK
(``mcp`` 2.x) and the TypeScript SDK (``@modelcontextprotocol/client``, with ``getToolUiResourceUri`` from
``@modelcontextprotocol/ext-apps``), each in both eras (``legacy``: initialize; ``2026-07-28``: pinned, and
``auto``), declaring the ``io.modelcontextprotocol/ui`` extension or not. Each lists and reads the resource and
the tools and calls two tools; a client without the extension sees on 2026-07-28 the tool list it saw before the
card existed, and every client gets the same tool results. The TypeScript half needs node and the npm packages
(skipped without them, failed under CI=true)."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from ipintel.api.mcp import apps
from tests.support.app import ROOT
from tests.support.mcp_interop import NODE_DIR, mcp_server, require_node_packages  # noqa: F401  (a fixture)

# The SDK is imported where it is used: importing it takes about a second, which every pytest run that collects
# this module (make test-fast, that runs none of its tests, included) would pay.
if importlib.util.find_spec("mcp") is None:
    pytest.skip("the MCP SDK is a dev dependency: pip install -e '.[dev]'", allow_module_level=True)
if TYPE_CHECKING:
    from mcp.client.extension import ClientExtension

pytestmark = pytest.mark.asyncio(loop_scope="module")

URI = "ui://ipintel/profile"
MIME = "text/html;profile=mcp-app"
LINKED = {"lookup_ip", "detect_vpn", "profile_ip"}
SCRIPT = ROOT / "tests" / "support" / "mcp_ts_apps_client.mjs"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("profile_ip", {"ip": "8.8.8.8", "include": ["geo", "vpn"]}),
    ("calculate_cidr", {"range": "10.0.0.0/8"}),
]


@functools.cache
def mcp_apps() -> type[ClientExtension]:
    """The extension a host that renders MCP Apps declares (its "Client (Host) Capabilities")."""
    from mcp.client.extension import ClientExtension

    class McpApps(ClientExtension):
        identifier = "io.modelcontextprotocol/ui"

        def settings(self) -> dict[str, Any]:
            return {"mimeTypes": [MIME]}

    return McpApps


async def python_client(url: str, mode: str, declare: bool) -> dict[str, Any]:
    from mcp import Client

    async with Client(url, mode=mode, extensions=[mcp_apps()()] if declare else None) as client:
        resources = (await client.list_resources()).resources
        read = (await client.read_resource(URI)).contents
        tools = (await client.list_tools()).tools
        calls = {name: await client.call_tool(name, arguments) for name, arguments in CALLS}
        return {
            "version": client.protocol_version,
            "capabilities": client.server_capabilities.model_dump(by_alias=True, exclude_none=True),
            "resources": [r.model_dump(by_alias=True, exclude_none=True) for r in resources],
            "read": [c.model_dump(by_alias=True, exclude_none=True) for c in read],
            "tools": [t.model_dump(by_alias=True, exclude_none=True) for t in tools],
            "calls": {
                name: {"text": r.content[0].text, "structured": r.structured_content, "isError": r.is_error}  # type: ignore[union-attr]
                for name, r in calls.items()
            },
        }


def check_resource(resources: list[dict[str, Any]], read: list[dict[str, Any]]) -> None:
    (entry,) = resources
    assert entry["uri"] == URI and entry["mimeType"] == MIME and entry["size"] == apps.DOCUMENT_BYTES
    assert entry["_meta"]["ui"]["csp"]["connectDomains"] == [] and entry["_meta"]["ui"]["prefersBorder"] is True
    (contents,) = read
    assert contents["uri"] == URI and contents["mimeType"] == MIME
    assert contents["text"] == apps.DOCUMENT  # what the server serves, unaltered by the SDK
    assert contents["_meta"]["ui"] == entry["_meta"]["ui"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_python_sdk_lists_and_reads_the_card_on_both_eras(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
    mode: str,
) -> None:
    url, _http = mcp_server
    declared = await python_client(url, mode, declare=True)
    plain = await python_client(url, mode, declare=False)
    assert declared["version"] == plain["version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    for seen in (declared, plain):
        check_resource(seen["resources"], seen["read"])
        if mode != "2026-07-28":  # a pinned client asks neither initialize nor server/discover
            assert seen["capabilities"]["extensions"] == {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}
    linked = {t["name"] for t in declared["tools"] if t.get("_meta", {}).get("ui", {}).get("resourceUri") == URI}
    assert linked == LINKED
    if mode == "legacy":  # the handshake era cannot tell them apart: the links are listed, and ignored
        assert declared["tools"] == plain["tools"]
    else:  # 2026-07-28: a client without the extension sees no _meta at all
        assert not any("_meta" in t for t in plain["tools"])
        assert [{k: v for k, v in t.items() if k != "_meta"} for t in declared["tools"]] == plain["tools"]
    assert declared["calls"] == plain["calls"]  # results do not depend on the extension
    for call in declared["calls"].values():
        assert call["isError"] is False and json.loads(call["text"]) == call["structured"]


def run_ts(node: str, url: str, mode: str, declare: bool) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(SCRIPT), url, mode, "yes" if declare else "no"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MCP_NODE_DIR": str(NODE_DIR)},
    )
    assert done.returncode == 0 and done.stdout.strip(), (
        f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["errors"] == [], out["errors"]
    return out


def call_answers(out: dict[str, Any]) -> dict[str, str]:
    """The raw JSON-RPC results of the tools/call requests, by tool, as the server sent them."""
    return {
        e["sent"]["params"]["name"]: json.dumps(
            {k: v for k, v in e["received"]["result"].items() if k not in ("resultType", "_meta")}, sort_keys=True
        )
        for e in out["raw"]
        if isinstance(e.get("sent"), dict) and e["sent"].get("method") == "tools/call"
    }


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_typescript_sdk_lists_and_reads_the_card_on_both_eras(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
    mode: str,
) -> None:
    node = require_node_packages()
    url, _http = mcp_server
    declared, plain = await asyncio.gather(
        asyncio.to_thread(run_ts, node, url, mode, True), asyncio.to_thread(run_ts, node, url, mode, False)
    )
    assert (
        declared["protocolVersion"] == plain["protocolVersion"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    )
    for seen in (declared, plain):
        check_resource(seen["resources"], seen["read"][URI])
        assert seen["serverCapabilities"]["resources"] == {"listChanged": False}
    # The ext-apps SDK's own reading of the tool metadata.
    assert {name for name, uri in declared["linked"].items() if uri == URI} == LINKED
    if mode == "legacy":
        assert declared["tools"] == plain["tools"]
    else:
        assert set(plain["linked"].values()) == {None}
        assert not any("_meta" in t for t in plain["tools"])
    assert call_answers(declared) == call_answers(plain) and len(call_answers(plain)) == len(CALLS)
    for name, result in declared["calls"].items():
        assert result["isError"] is False, name
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"], name
