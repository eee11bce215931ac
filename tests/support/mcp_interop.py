"""Shared by the MCP interoperability tests (``tests/test_mcp_sdk.py``, ``tests/test_mcp_typescript.py``):
the real server process with local upstreams, the calls every client makes, and the npm packages.

Real clients (the Python SDK, the TypeScript SDK, the MCP Inspector CLI) talk to ``python -m ipintel``
on 127.0.0.1; its upstreams are local too: a DNS server, an RDAP registry and a reputation API.
Each client lists the tools and calls every one with good arguments (:data:`CALLS`, which succeed
against those upstreams) and bad ones (:data:`BAD_CALLS`, which must be ``isError`` results carrying
the error code and no ``structuredContent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from ipintel.api.mcp.tools import TOOLS
from tests.support import ci
from tests.support.app import ROOT, server_process
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import healthy_list
from tests.support.rdap_server import Reply, rdap_fixture, rdap_server
from tests.support.reputation_server import ReputationServer

# The revision of the 2026 stateless era and the versions of the initialize handshake.
MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
ALL_VERSIONS = [MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

# A batch of every kind of entry: good, a duplicate in another spelling, malformed, reserved, IPv6, registered.
MIXED_IPS = ["8.8.8.8", "::ffff:8.8.8.8", "not-an-ip", "10.0.0.1", "2001:4860:4860::8888", "3.3.3.3"]

# Calls per tool that succeed against the local upstreams below.
CALLS: dict[str, list[dict[str, Any]]] = {
    "lookup_ip": [{"ip": "8.8.8.8"}],
    "whois_ip": [{"ip": "3.3.3.3"}],
    "lookup_dns": [{"domain": "example.com"}, {"domain": "example.com", "type": "MX"}, {"ip": "8.8.8.8"}],
    "check_blacklist": [{"ip": "45.33.32.156"}],
    "detect_vpn": [{"ip": "8.8.8.8"}],
    "calculate_cidr": [{"range": "192.168.1.77/24"}, {"range": "2001:db8::/48"}],
    "profile_ip": [
        {"ip": "8.8.8.8"},  # every part: the registry knows no 8.8.8.8 here, so whois is an error in its place
        {"ip": "3.3.3.3", "include": ["whois", "blacklist", "ptr"]},
        {"ip": "2001:4860:4860::8888", "include": ["geo", "blacklist"]},  # blacklist: ipv6_not_supported
    ],
    "lookup_ips": [
        {"ips": MIXED_IPS, "include": ["geo", "vpn", "whois"]},
        {"ips": ["45.33.32.156"]},
    ],
    "lookup_asn": [{"asn": "AS15169"}, {"asn": "15169"}],
}

# Calls per tool that must be isError results, with the error code their text carries.
BAD_CALLS: dict[str, list[tuple[dict[str, Any], str]]] = {
    "lookup_ip": [({"ip": "not-an-ip"}, "invalid_ip"), ({"ip": "10.0.0.1"}, "reserved_address")],
    "whois_ip": [({"ip": "999.1.1.1"}, "invalid_ip"), ({"ip": "192.168.0.1"}, "reserved_address")],
    "lookup_dns": [
        ({"domain": "bad..name"}, "invalid_domain"),
        ({"domain": "example.com", "type": "SOA"}, "invalid_record_type"),
        ({"domain": "example.com", "ip": "8.8.8.8"}, "invalid_request"),
        ({"ip": "not-an-ip"}, "invalid_ip"),
    ],
    "check_blacklist": [({"ip": "nope"}, "invalid_ip"), ({"ip": "127.0.0.1"}, "reserved_address")],
    "detect_vpn": [({"ip": "nope"}, "invalid_ip"), ({"ip": "100.64.0.1"}, "reserved_address")],
    "calculate_cidr": [
        ({"range": "10.0.0.0/33"}, "invalid_range"),
        ({"range": "not-a-range"}, "invalid_range"),
        ({"range": "10.0.0.0/8", "extra": True}, "invalid_request"),
    ],
    "profile_ip": [
        ({"ip": "not-an-ip"}, "invalid_ip"),
        ({"ip": "10.0.0.1"}, "reserved_address"),
        ({"ip": "8.8.8.8", "include": ["geo", "nope"]}, "invalid_request"),
        ({"ip": "8.8.8.8", "include": []}, "invalid_request"),
    ],
    "lookup_ips": [
        ({"ips": []}, "invalid_request"),
        ({"ips": ["8.8.8.8"] * 101}, "invalid_request"),
        ({"ips": "8.8.8.8"}, "invalid_request"),
        ({"ips": ["8.8.8.8"], "include": ["nope"]}, "invalid_request"),
    ],
    "lookup_asn": [
        ({"asn": "ASX"}, "invalid_asn"),
        ({"asn": 15169}, "invalid_asn"),
        ({"asn": "AS64512"}, "registration_not_found"),  # private use: no registry holds it
        ({"asn": "AS15169", "ip": "8.8.8.8"}, "invalid_request"),
    ],
}


def live_tools() -> list[str]:
    """The tools the server lists, in its order."""
    return [tool.name for tool in TOOLS]


def error_code(text: str) -> str:
    """The error code in the text of an isError result (``{"error": {"code", "message"}}``)."""
    return json.loads(text)["error"]["code"]


@contextlib.asynccontextmanager
async def local_world(dns: DnsServer) -> AsyncIterator[dict[str, str]]:
    """Local upstreams for every tool; yields the server's environment variables for them."""
    dns.add("example.com", "A", "93.184.215.14")
    dns.add("example.com", "MX", "10 mail.example.com")
    dns.add_ptr("8.8.8.8", "dns.google")
    env = {"IPINTEL_DNS_SERVERS": dns.env, "IPINTEL_DNS_TIMEOUT": "0.5"}
    async with contextlib.AsyncExitStack() as stack:
        rdap = await stack.enter_async_context(rdap_server({"arin": ["3.0.0.0/8"]}))
        rdap.set(rdap.ip_path("arin", "3.3.3.3"), Reply.json(rdap_fixture("arin_3_0_0_0")))
        rdap.set(rdap.autnum_path("arin", 15169), Reply.json(rdap_fixture("arin_autnum_15169")))
        env["IPINTEL_RDAP_BOOTSTRAP_URL"] = rdap.bootstrap_url
        healthy_list(dns, "one.test", listed={"45.33.32.156": "127.0.0.2"})
        api = await stack.enter_async_context(ReputationServer())
        env["IPINTEL_DNSBL_ZONES"] = "one.test"
        env["IPINTEL_REPUTATION_URL"] = api.url("/api")
        yield env


# One server process per test module (starting one takes seconds), on the module's event loop so that
# the local upstreams it talks to keep running between tests. A test module imports this fixture and
# sets ``pytestmark = pytest.mark.asyncio(loop_scope="module")``.
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


# The npm packages (the TypeScript SDK client, Ajv, ajv-formats, the MCP Inspector), installed by
# `make test` (the Makefile's node-packages rule) at exact versions.
NODE_DIR = ROOT / ".venv" / "node"
NODE_MODULES = NODE_DIR / "node_modules"
INSPECTOR = NODE_MODULES / ".bin" / "mcp-inspector"
_NODE_PACKAGES = [
    "@modelcontextprotocol/client",
    "@modelcontextprotocol/ext-apps",
    "@modelcontextprotocol/inspector",
    "ajv",
    "ajv-formats",
]


def require_node_packages() -> str:
    """The path of ``node``; skips the test when node or the packages are missing (fails under CI,
    where npm is available and ``make test`` installs them)."""
    node = shutil.which("node")
    missing = [name for name in _NODE_PACKAGES if not (NODE_MODULES / name / "package.json").exists()]
    if node and not missing:
        return node
    why = (
        "node/npm not found: install Node.js 20+ with npm (e.g. apt-get install nodejs npm), then run `make test`"
        if node is None or shutil.which("npm") is None
        else f"npm packages missing from {NODE_DIR} ({', '.join(missing)}): `make test` installs them"
    )
    ci.missing(f"the MCP interoperability tests need node: {why}")
