"""Interoperability: the official MCP Python SDK client (``mcp`` 2.x) and the MCP Inspector CLI against the
real server process.

The SDK's ``Client(url, mode=...)`` speaks Streamable HTTP in three modes: ``"legacy"`` (the ``initialize``
handshake), ``"auto"`` (probe ``server/discover`` at 2026-07-28, fall back to ``initialize`` when the server
does not answer it with a modern version) and a pinned revision (``mode="2026-07-28"``: no probe, every
request carries the revision's ``_meta`` keys and ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name``
headers). Each mode lists the tools and calls every one with good and bad arguments. The HTTP exchanges
are recorded, so that a 2026-07-28 connection can be checked on the wire (``resultType``, the
``serverInfo`` stamp, ``ttlMs``/``cacheScope``), which the SDK's models do not tell apart from defaults.
The Inspector CLI runs in its ``legacy`` and ``modern`` (pinned 2026-07-28) protocol eras.

Fixtures and the calls are shared with tests/test_mcp_typescript.py (tests/support/mcp_interop.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from tests.support.mcp_interop import (
    ALL_VERSIONS,
    BAD_CALLS,
    CALLS,
    INSPECTOR,
    LEGACY_VERSION,
    MIXED_IPS,
    MODERN_VERSION,
    error_code,
    live_tools,
    mcp_server,  # noqa: F401  (a fixture)
    require_node_packages,
)

# The SDK is imported where it is used: importing it takes about a second, which every pytest run that collects
# this module (make test-fast, that runs none of its tests, included) would pay.
if importlib.util.find_spec("mcp") is None:
    pytest.skip("the MCP SDK is a dev dependency: pip install -e '.[dev]'", allow_module_level=True)
if TYPE_CHECKING:
    from mcp import Client

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

CIDR_10_8 = {
    "network": "10.0.0.0",
    "broadcast": "10.255.255.255",
    "subnetMask": "255.0.0.0",
    "wildcardMask": "0.255.255.255",
    "prefixLength": 8,
    "totalHosts": 16777216,
    "usableHosts": 16777214,
    "firstHost": "10.0.0.1",
    "lastHost": "10.255.255.254",
}


class Wire:
    """The HTTP exchanges of one SDK client: what it sent (headers, JSON body) and what came back."""

    def __init__(self) -> None:
        self.exchanges: list[dict[str, Any]] = []

    async def on_response(self, response: Any) -> None:
        request = response.request
        entry: dict[str, Any] = {
            "http": f"{request.method} {response.status_code}",
            "headers": {k: v for k, v in request.headers.items() if k.lower().startswith("mcp-")},
        }
        with contextlib.suppress(ValueError):
            entry["sent"] = json.loads(request.content) if request.content else None
        if response.headers.get("content-type", "").startswith("application/json"):
            await response.aread()
            entry["received"] = json.loads(response.content)
        self.exchanges.append(entry)

    def answers(self, method: str) -> list[dict[str, Any]]:
        """The JSON-RPC answers (``result`` or ``error`` objects) to requests of ``method``."""
        return [
            e["received"]
            for e in self.exchanges
            if isinstance(e.get("sent"), dict) and e["sent"].get("method") == method and "received" in e
        ]

    def __str__(self) -> str:
        return "\n".join(json.dumps(e)[:1500] for e in self.exchanges)


@contextlib.asynccontextmanager
async def sdk_client(url: str, mode: str) -> AsyncIterator[tuple[Client, Wire]]:
    """``Client(url, mode=mode)``, with the SDK's default HTTP client plus a recorder of the exchanges."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    wire = Wire()
    async with create_mcp_http_client() as http:
        http.event_hooks = {"request": [], "response": [wire.on_response]}
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client, wire


def check_modern_wire(wire: Wire) -> None:
    """2026-07-28 results on the wire: ``resultType: "complete"``, the ``serverInfo`` stamp in ``_meta``;
    ``tools/list`` carries ``ttlMs`` and ``cacheScope``. The SDK's models default the missing fields."""
    problems = []
    for entry in wire.exchanges:
        sent, received = entry.get("sent"), entry.get("received")
        if not isinstance(sent, dict) or "id" not in sent or not isinstance(received, dict):
            continue
        if "result" not in received:
            continue
        result = received["result"]
        method = sent.get("method")
        if result.get("resultType") != "complete":
            problems.append(f"{method}: resultType is {result.get('resultType')!r}, not 'complete'")
        if SERVER_INFO_KEY not in (result.get("_meta") or {}):
            problems.append(f"{method}: no _meta[{SERVER_INFO_KEY!r}]")
        if method == "tools/list" and not ("ttlMs" in result and "cacheScope" in result):
            problems.append(f"tools/list: no ttlMs/cacheScope (keys: {sorted(result)})")
    assert not problems, (
        "2026-07-28 results are not what the revision requires:\n" + "\n".join(problems) + (f"\n\nexchanges:\n{wire}")
    )


async def list_and_call_everything(client: Client) -> None:
    """List the tools; call each with its good and bad arguments; an unknown tool is -32602."""
    from mcp.shared.exceptions import MCPError

    listing = await client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert list(tools) == live_tools()

    for name, tool in tools.items():
        assert tool.title, name
        assert tool.output_schema is not None and tool.annotations is not None, name
        assert tool.annotations.read_only_hint is True, name
        validator = Draft202012Validator(tool.output_schema, format_checker=FormatChecker())
        for arguments in CALLS[name]:
            result = await client.call_tool(name, arguments)
            assert result.is_error is False, (name, arguments, result.content)
            assert result.structured_content is not None, (name, arguments)
            validator.validate(result.structured_content)
            assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        for arguments, code in BAD_CALLS[name]:
            result = await client.call_tool(name, arguments)
            assert result.is_error is True, (name, arguments, result)
            assert result.structured_content is None, (name, arguments, result.structured_content)
            assert error_code(result.content[0].text) == code, (name, arguments, result.content)  # type: ignore[union-attr]

    cidr = await client.call_tool("calculate_cidr", {"range": "10.0.0.0/8"})
    assert cidr.structured_content == CIDR_10_8

    with pytest.raises(MCPError) as unknown:
        await client.call_tool("no_such_tool", {})
    assert unknown.value.code == -32602


async def test_sdk_legacy_client_initializes_lists_and_calls_every_tool(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
) -> None:
    url, _http = mcp_server
    async with sdk_client(url, "legacy") as (client, wire):
        assert client.session.initialize_result is not None
        assert client.protocol_version == LEGACY_VERSION
        assert client.server_info is not None and client.server_info.name == "ipintel"
        assert client.server_capabilities.tools is not None
        assert client.instructions and "calculate_cidr" in client.instructions
        assert await client.session.send_ping() is not None
        await list_and_call_everything(client)
    assert not wire.answers("server/discover"), "legacy mode does not probe"


async def test_sdk_auto_client_lists_and_calls_every_tool(mcp_server: tuple[str, httpx.Client]) -> None:  # noqa: F811
    """Whichever era ``auto`` settles on, everything works in it (the era itself: the next test)."""
    url, _http = mcp_server
    async with sdk_client(url, "auto") as (client, wire):
        assert client.protocol_version in (MODERN_VERSION, LEGACY_VERSION)
        assert client.server_info is not None and client.server_info.name == "ipintel"
        assert client.server_capabilities.tools is not None
        assert client.instructions and "calculate_cidr" in client.instructions
        modern = client.session.discover_result is not None
        await list_and_call_everything(client)
    if modern:
        check_modern_wire(wire)


async def test_sdk_auto_client_ends_on_2026_07_28(mcp_server: tuple[str, httpx.Client]) -> None:  # noqa: F811
    """``auto`` probes ``server/discover``; a server speaking the revision answers it, listing 2026-07-28
    and the four handshake versions, and the client adopts 2026-07-28 (no ``initialize``). Fails, rather
    than skips, while the server answers ``server/discover`` with -32601."""
    url, _http = mcp_server
    async with sdk_client(url, "auto") as (client, wire):
        negotiated = client.protocol_version
        discover = client.session.discover_result
        assert negotiated == MODERN_VERSION, (
            f"the auto client ended on {negotiated}, not {MODERN_VERSION}: the server answered its "
            f"server/discover probe with {wire.answers('server/discover')}"
        )
        assert discover is not None and client.session.initialize_result is None
        assert sorted(discover.supported_versions) == sorted(ALL_VERSIONS), discover.supported_versions
        assert discover.capabilities.tools is not None
        assert client.server_info is not None and client.server_info.name == "ipintel", (
            "the discover result carries no _meta serverInfo stamp"
        )
        assert not wire.answers("initialize")
        await client.list_tools()
    check_modern_wire(wire)


async def test_sdk_client_pinned_to_2026_07_28_lists_and_calls_every_tool(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
) -> None:
    """``mode="2026-07-28"``: no probe and no handshake; every request is stamped with the revision and
    every answer must be a 2026-07-28 result. Fails, rather than skips, until the server speaks it."""
    url, _http = mcp_server
    async with sdk_client(url, MODERN_VERSION) as (client, wire):
        assert client.protocol_version == MODERN_VERSION
        await list_and_call_everything(client)
    sent = [e for e in wire.exchanges if isinstance(e.get("sent"), dict) and "id" in e["sent"]]
    assert sent and all(e["headers"].get("mcp-protocol-version") == MODERN_VERSION for e in sent)
    check_modern_wire(wire)


async def test_sdk_client_profiles_an_address_and_a_mixed_batch(mcp_server: tuple[str, httpx.Client]) -> None:  # noqa: F811
    """``profile_ip`` and ``lookup_ips`` through the SDK: structuredContent valid against the listed outputSchema
    and the same objects as the REST routes; the batch keeps order, answers bad entries in place and looks a
    duplicate up once."""
    url, http = mcp_server
    async with sdk_client(url, "auto") as (client, _wire):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        profile = await client.call_tool("profile_ip", {"ip": "3.3.3.3"})
        batch = await client.call_tool("lookup_ips", {"ips": MIXED_IPS, "include": ["geo", "whois"]})
    for name, result in (("profile_ip", profile), ("lookup_ips", batch)):
        assert result.is_error is False, (name, result.content)
        schema = tools[name].output_schema
        assert schema is not None, name
        Draft202012Validator(schema, format_checker=FormatChecker()).validate(result.structured_content)

    data = profile.structured_content
    assert data is not None and list(data) == ["ip", "geo", "vpn", "whois", "blacklist", "ptr"]
    assert data["whois"]["handle"] == "NET-3-0-0-0-1" and data["whois"]["registry"] == "ARIN"
    assert data["blacklist"]["status"] == "clear" and data["ptr"]["records"] == []
    assert data["geo"]["error"]["code"] == "address_not_found"  # a part's error in its place
    rest = await asyncio.to_thread(http.get, "/ip/3.3.3.3/profile")
    assert rest.json()["data"] == data

    assert batch.structured_content is not None
    results = batch.structured_content["results"]
    assert [entry["ip"] for entry in results] == MIXED_IPS
    google, mapped, bad, reserved, v6, arin = results
    assert google["data"] == mapped["data"] and google["data"]["geo"]["city"] == "Mountain View"
    assert (bad["error"]["code"], reserved["error"]["code"]) == ("invalid_ip", "reserved_address")
    assert list(v6["data"]) == ["ip", "geo", "whois"] and v6["data"]["ip"] == "2001:4860:4860::8888"
    assert arin["data"]["whois"] == data["whois"]
    rest_batch = await asyncio.to_thread(http.post, "/ip/batch", json={"ips": MIXED_IPS, "include": ["geo", "whois"]})
    assert rest_batch.json()["data"] == batch.structured_content


async def test_transport_rules_on_the_real_server(mcp_server: tuple[str, httpx.Client]) -> None:  # noqa: F811
    """What only a real HTTP server shows: a refused body leaves the connection usable, /mcp/ answers
    without a redirect, an SSE-only client gets one event, and no session id is issued."""
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    headers = {"Content-Type": "application/json"}
    _url, http = mcp_server

    def exchange() -> list[httpx.Response]:
        big = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x" * (2 << 20)}})
        return [
            http.post("/mcp", content=big, headers=headers),
            http.post("/mcp", content=ping, headers=headers),  # same keep-alive pool
            http.post("/mcp/", content=ping, headers=headers),
            http.post("/mcp", content=ping, headers={**headers, "Accept": "text/event-stream"}),
            http.get("/mcp"),
            http.post("/mcp", content=ping, headers={**headers, "Origin": "https://evil.example"}),
        ]

    too_big, after, slash, sse, get, evil = await asyncio.to_thread(exchange)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == -32000
    assert after.status_code == 200 and after.json()["result"] == {}
    assert slash.status_code == 200 and slash.json()["id"] == 1
    assert sse.headers["content-type"].startswith("text/event-stream")
    assert sse.text.startswith("event: message\ndata: ")
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    assert evil.status_code == 403
    for response in (after, slash, sse):
        assert "mcp-session-id" not in response.headers


# The MCP Inspector's CLI (docs/MCP.md#clients), installed by `make test` from the npm registry into .venv/node.
# `--protocol-era legacy` is the initialize handshake; `modern` pins 2026-07-28 (server/discover must
# offer it, no fallback). Pinned: its command line changed between major versions.


def _inspector(home: Path, url: str, era: str, *args: str) -> tuple[int, Any, str]:
    """One CLI run: its exit status, the JSON it printed on stdout (``--format json``), its stderr."""
    done = subprocess.run(
        [str(INSPECTOR), "--cli", url, "--transport", "http", "--protocol-era", era, "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "HOME": str(home)},  # its catalog and client config go to a scratch home
    )
    try:
        printed, _ = json.JSONDecoder().raw_decode(done.stdout.lstrip())
    except ValueError:
        printed = None
    return done.returncode, printed, done.stderr


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_mcp_inspector_cli_lists_and_calls_every_tool(
    mcp_server: tuple[str, httpx.Client],  # noqa: F811
    era: str,
    tmp_path: Path,
) -> None:
    require_node_packages()
    url, _http = mcp_server
    # --strict: exit 6 on error-severity schema portability problems (warnings are only counted).
    status, listing, stderr = await asyncio.to_thread(
        _inspector, tmp_path, url, era, "--strict", "--method", "tools/list"
    )
    assert status == 0 and listing is not None and "result" in listing, (
        f"inspector --protocol-era {era} tools/list: exit {status}, stdout {listing}, stderr {stderr[-3000:]}"
    )
    tools = {tool["name"]: tool for tool in listing["result"]["tools"]}
    assert list(tools) == live_tools()

    runs: list[tuple[str, dict[str, Any], str | None]] = [
        (name, arguments, None) for name in tools for arguments in CALLS[name]
    ] + [(name, arguments, code) for name in tools for arguments, code in BAD_CALLS[name]]
    limit = asyncio.Semaphore(3)

    async def call(name: str, arguments: dict[str, Any]) -> tuple[int, Any, str]:
        async with limit:
            return await asyncio.to_thread(
                _inspector,
                tmp_path,
                url,
                era,
                "--method",
                "tools/call",
                "--tool-name",
                name,
                "--tool-args-json",
                json.dumps(arguments),
            )

    outcomes = await asyncio.gather(*(call(name, arguments) for name, arguments, _code in runs))
    for (name, arguments, code), (status, printed, stderr) in zip(runs, outcomes, strict=True):
        where = f"inspector --protocol-era {era} {name} {arguments}: exit {status}, {printed}, {stderr[-2000:]}"
        assert printed is not None and "result" in printed, where
        result = printed["result"]
        if code is None:
            assert status == 0 and result.get("isError") in (None, False), where
            Draft202012Validator(tools[name]["outputSchema"], format_checker=FormatChecker()).validate(
                result["structuredContent"]
            )
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"], where
        else:
            assert status == 5 and result["isError"] is True, where  # 5: the tool returned isError
            assert "structuredContent" not in result, where
            assert error_code(result["content"][0]["text"]) == code, where
