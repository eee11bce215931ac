"""Interoperability: the official MCP Python SDK client (``mcp`` 2.x) against the real server process.

The SDK's ``Client`` speaks Streamable HTTP. Its default mode (``"auto"``)
first probes ``server/discover`` (the 2026 stateless era) and falls back to
the ``initialize`` handshake when the server answers -32601, as ours does;
``mode="legacy"`` goes straight to the handshake. Both must initialize, list
the tools and call every listed one. Upstreams are local: a DNS server, an
RDAP registry and a reputation API on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from jsonschema import Draft202012Validator

from ipintel.api.mcp_tools import TOOLS_BY_NAME
from ipintel.service import Intel
from tests.support.app import server_process
from tests.support.dns_server import DnsServer

mcp = pytest.importorskip("mcp", reason="the MCP SDK is a dev dependency: pip install -e '.[dev]'")
from mcp import Client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ORDER = ["lookup_ip", "whois_ip", "lookup_dns", "check_blacklist", "detect_vpn", "calculate_cidr"]

# One call per tool that succeeds against the local upstreams below.
CALLS: dict[str, list[dict[str, Any]]] = {
    "lookup_ip": [{"ip": "8.8.8.8"}],
    "whois_ip": [{"ip": "3.3.3.3"}],
    "lookup_dns": [{"domain": "example.com"}, {"domain": "example.com", "type": "MX"}, {"ip": "8.8.8.8"}],
    "check_blacklist": [{"ip": "45.33.32.156"}],
    "detect_vpn": [{"ip": "8.8.8.8"}],
    "calculate_cidr": [{"range": "192.168.1.77/24"}, {"range": "2001:db8::/48"}],
}

RDAP_NETWORK = {
    "rdapConformance": ["rdap_level_0"],
    "objectClassName": "ip network",
    "handle": "NET-3-0-0-0-1",
    "startAddress": "3.0.0.0",
    "endAddress": "3.127.255.255",
    "ipVersion": "v4",
    "name": "AT-88-Z",
    "events": [{"eventAction": "registration", "eventDate": "2019-06-07T10:51:44-04:00"}],
}


def live(name: str) -> bool:
    tool = TOOLS_BY_NAME[name]
    return all(callable(getattr(Intel, m, None)) for m in tool.requires) and tool.schema_files_present()


@contextlib.asynccontextmanager
async def local_world(dns: DnsServer) -> AsyncIterator[dict[str, str]]:
    """Local upstreams for every live tool; yields the server's environment variables for them."""
    dns.add("example.com", "A", "93.184.215.14")
    dns.add("example.com", "MX", "10 mail.example.com")
    dns.add_ptr("8.8.8.8", "dns.google")
    env = {"IPINTEL_DNS_SERVERS": dns.env, "IPINTEL_DNS_TIMEOUT": "0.5"}
    async with contextlib.AsyncExitStack() as stack:
        if live("whois_ip"):
            from tests.support.rdap_server import Reply, rdap_server

            rdap = await stack.enter_async_context(rdap_server({"arin": ["3.0.0.0/8"]}))
            rdap.set(rdap.ip_path("arin", "3.3.3.3"), Reply.json(RDAP_NETWORK))
            env["IPINTEL_RDAP_BOOTSTRAP_URL"] = rdap.bootstrap_url
        if live("check_blacklist"):
            from tests.support.dnsbl import healthy_list
            from tests.support.reputation_server import ReputationServer

            healthy_list(dns, "one.test", listed={"45.33.32.156": "127.0.0.2"})
            api = await stack.enter_async_context(ReputationServer())
            env["IPINTEL_DNSBL_ZONES"] = "one.test"
            env["IPINTEL_REPUTATION_URL"] = api.url("/api")
        yield env


# One server process for the module (starting one takes seconds), on the module's event loop so that
# the local upstreams it talks to keep running between tests.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp_server(city_db: Path, asn_db: Path) -> AsyncIterator[tuple[str, httpx.Client]]:
    """The real server (``python -m ipintel``): its /mcp URL and an httpx client for it."""
    with DnsServer() as dns:
        async with local_world(dns) as upstreams:
            env = {
                "IPINTEL_GEOIP_CITY_DB": str(city_db),
                "IPINTEL_GEOIP_ASN_DB": str(asn_db),
                "IPINTEL_RATE_LIMITS": "off",
                "IPINTEL_FEEDS": "off",
                **upstreams,
            }
            with contextlib.ExitStack() as stack:
                # Started in a thread: the local upstreams run on this event loop and must keep serving.
                http, _proc = await asyncio.to_thread(stack.enter_context, server_process(env))
                yield str(http.base_url).rstrip("/") + "/mcp", http
                await asyncio.to_thread(stack.close)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_initializes_lists_and_calls_every_tool(
    mcp_server: tuple[str, httpx.Client], mode: str
) -> None:
    url, _http = mcp_server
    async with Client(url, mode=mode) as client:
        # initialize (auto: after server/discover was answered -32601)
        assert client.session.initialize_result is not None
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "ipintel"
        assert client.server_capabilities.tools is not None
        assert client.instructions and "calculate_cidr" in client.instructions
        assert await client.session.send_ping() is not None

        listing = await client.list_tools()
        tools = {tool.name: tool for tool in listing.tools}
        assert [tool.name for tool in listing.tools] == [name for name in ORDER if live(name)]

        called = []
        for name, tool in tools.items():
            assert tool.output_schema is not None and tool.annotations is not None
            assert tool.annotations.read_only_hint is True
            for arguments in CALLS[name]:
                result = await client.call_tool(name, arguments)
                assert result.is_error is False, (name, arguments, result.content)
                assert result.structured_content is not None
                Draft202012Validator(tool.output_schema).validate(result.structured_content)
                assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
                called.append(name)
        assert set(called) == set(tools)

        cidr = await client.call_tool("calculate_cidr", {"range": "10.0.0.0/8"})
        assert cidr.structured_content == {
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

        refused = await client.call_tool("lookup_ip", {"ip": "10.0.0.1"})
        assert refused.is_error is True
        assert json.loads(refused.content[0].text)["error"]["code"] == "reserved_address"  # type: ignore[union-attr]

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.code == -32602


async def test_transport_rules_on_the_real_server(mcp_server: tuple[str, httpx.Client]) -> None:
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


# The MCP Inspector's CLI (SPEC 8), installed by `make test` from the npm registry into the venv when npm
# is available. Pinned: its command line changed between major versions.
INSPECTOR = Path(__file__).resolve().parents[1] / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def _inspector(url: str, *args: str) -> dict[str, Any]:
    import subprocess

    done = subprocess.run(
        [str(INSPECTOR), "--cli", url, "--transport", "http", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # The CLI prints the JSON-RPC result first (and a summary line after it for isError results).
    decoder = json.JSONDecoder()
    result, _ = decoder.raw_decode(done.stdout.lstrip())
    return result  # type: ignore[no-any-return]


@pytest.mark.skipif(
    not INSPECTOR.exists(), reason="the MCP Inspector CLI is not installed (make test installs it with npm)"
)
async def test_mcp_inspector_cli_lists_and_calls_every_tool(mcp_server: tuple[str, httpx.Client]) -> None:
    url, _http = mcp_server
    listing = await asyncio.to_thread(_inspector, url, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listing["tools"]}
    assert list(tools) == [name for name in ORDER if live(name)]
    for name, tool in tools.items():
        for arguments in CALLS[name]:
            flags = [f"{key}={value}" for key, value in arguments.items()]
            result = await asyncio.to_thread(
                _inspector, url, "--method", "tools/call", "--tool-name", name, "--tool-arg", *flags
            )
            assert result.get("isError") in (None, False), (name, arguments, result)
            Draft202012Validator(tool["outputSchema"]).validate(result["structuredContent"])
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
