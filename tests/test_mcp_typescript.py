"""Interoperability: the MCP TypeScript SDK 2.x client (``@modelcontextprotocol/client``, npm) against the
real server process, in its three version-negotiation modes: ``legacy`` (the ``initialize`` handshake),
``auto`` (probe ``server/discover``, which must settle on 2026-07-28) and ``{pin: "2026-07-28"}``.

tests/support/mcp_ts_client.mjs does the client side: it lists the tools, calls each with good and bad
arguments, validates every ``structuredContent`` against its tool's ``outputSchema`` with strict Ajv
(draft 2020-12, ajv-formats) and prints the outcomes with the HTTP exchanges it made. The npm packages
are installed by ``make test`` into .venv/node; without node/npm these tests are skipped (failed under CI).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from typing import Any

import httpx
import pytest

from tests.support.app import ROOT
from tests.support.mcp_interop import (
    ALL_VERSIONS,
    BAD_CALLS,
    CALLS,
    LEGACY_VERSION,
    MODERN_VERSION,
    NODE_DIR,
    error_code,
    live_tools,
    mcp_server,  # noqa: F401  (a fixture)
    require_node_packages,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

SCRIPT = ROOT / "tests" / "support" / "mcp_ts_client.mjs"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


def run_client(node: str, url: str, mode: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(SCRIPT), url, mode],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MCP_NODE_DIR": str(NODE_DIR)},
    )
    assert done.returncode == 0 and done.stdout.strip(), (
        f"{SCRIPT.name} {mode}: exit {done.returncode}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    )
    return json.loads(done.stdout)


def show_wire(out: dict[str, Any]) -> str:
    lines = []
    exchanges = out.get("wire", [])
    for e in exchanges[:12]:
        headers = {k: v for k, v in e.get("requestHeaders", {}).items() if k.startswith("mcp-")}
        received = str(e.get("responseBody", e.get("fetchError")))
        lines.append(
            f"{e['method']} {e.get('status')} {headers}\n  sent: {e.get('requestBody')}\n  received: {received[:1500]}"
        )
    if len(exchanges) > 12:
        lines.append(f"... and {len(exchanges) - 12} more exchanges")
    return "\n".join(lines)


def answers(out: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The JSON answers the server gave to requests of ``method`` (JSON, not SSE, bodies)."""
    found = []
    for e in out.get("wire", []):
        try:
            sent = json.loads(e.get("requestBody") or "null")
            received = json.loads(e.get("responseBody") or "null")
        except ValueError:
            continue
        if isinstance(sent, dict) and sent.get("method") == method and isinstance(received, dict):
            found.append(received)
    return found


@pytest.mark.parametrize("mode", ["legacy", "auto", MODERN_VERSION])
async def test_typescript_sdk_client_lists_and_calls_every_tool(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
    mode: str,
) -> None:
    node = require_node_packages()
    url, _http = mcp_server
    expected = live_tools()
    calls = [{"name": name, "arguments": arguments} for name in expected for arguments in CALLS[name]]
    calls += [{"name": name, "arguments": arguments} for name in expected for arguments, _code in BAD_CALLS[name]]
    calls.append({"name": "no_such_tool", "arguments": {}})
    out = await asyncio.to_thread(run_client, node, url, mode, calls)
    wire = show_wire(out)

    assert out["connected"], f"{mode}: connect failed: {out.get('connectError')}\n{wire}"
    modern = mode != "legacy"
    assert out["protocolVersion"] == (MODERN_VERSION if modern else LEGACY_VERSION), (
        f"{mode}: negotiated {out['protocolVersion']} ({out['era']})\n{wire}"
    )
    assert out["era"] == ("modern" if modern else "legacy")
    assert out["serverInfo"] and out["serverInfo"]["name"] == "ipintel", out["serverInfo"]
    assert out["serverCapabilities"].get("tools") is not None
    assert out["instructions"] and "calculate_cidr" in out["instructions"]
    if modern:
        assert sorted(out["discover"]["supportedVersions"]) == sorted(ALL_VERSIONS), out["discover"]
        assert not answers(out, "initialize"), f"{mode}: a 2026-07-28 connection sent initialize\n{wire}"
    else:
        assert not answers(out, "server/discover"), f"legacy mode probed server/discover\n{wire}"

    assert "listError" not in out, f"{mode}: tools/list failed: {out.get('listError')}\n{wire}"
    tools = {tool["name"]: tool for tool in out["tools"]}
    assert list(tools) == expected
    for name, tool in tools.items():
        assert tool.get("title"), name
        assert tool.get("annotations", {}).get("readOnlyHint") is True, name
        # strict Ajv (2020-12, ajv-formats) compiles every schema the server sends
        assert out["schemas"][name] == {"outputSchemaError": None, "inputSchemaError": None}, (name, out["schemas"])

    bad_codes = {(name, json.dumps(arguments)): code for name in expected for arguments, code in BAD_CALLS[name]}
    for outcome in out["calls"]:
        name, arguments = outcome["name"], outcome["arguments"]
        where = f"{mode} {name} {arguments}: {json.dumps(outcome)[:2000]}"
        if name == "no_such_tool":
            assert outcome.get("thrown", {}).get("code") == -32602, where
            continue
        assert "thrown" not in outcome, where
        code = bad_codes.get((name, json.dumps(arguments)))
        if code is None:
            assert outcome["isError"] is False and outcome["hasStructuredContent"], where
            assert outcome["schemaValid"] is True, where
            assert json.loads(outcome["text"]) == outcome["result"]["structuredContent"], where
        else:
            assert outcome["isError"] is True and not outcome["hasStructuredContent"], where
            assert error_code(outcome["text"]) == code, where
    assert len(out["calls"]) == len(calls)
    assert "closeError" not in out, out.get("closeError")

    if modern:
        # On the wire: every request stamped with the revision, every result a 2026-07-28 result.
        problems = []
        for e in out["wire"]:
            sent = json.loads(e.get("requestBody") or "null")
            if not (isinstance(sent, dict) and "id" in sent):
                continue
            method = sent["method"]
            if e["requestHeaders"].get("mcp-protocol-version") != MODERN_VERSION:
                problems.append(
                    f"{method}: sent MCP-Protocol-Version {e['requestHeaders'].get('mcp-protocol-version')}"
                )
            received = json.loads(e.get("responseBody") or "null")
            result = received.get("result") if isinstance(received, dict) else None
            if result is None:
                continue
            if result.get("resultType") != "complete":
                problems.append(f"{method}: resultType {result.get('resultType')!r}")
            if SERVER_INFO_KEY not in (result.get("_meta") or {}):
                problems.append(f"{method}: no _meta serverInfo")
            if method == "tools/list" and not ("ttlMs" in result and "cacheScope" in result):
                problems.append("tools/list: no ttlMs/cacheScope")
        assert not problems, "\n".join(problems) + "\n" + wire
