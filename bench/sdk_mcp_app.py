"""The baseline of ``bench_mcp``: the same ``calculate_cidr`` tool on the MCP SDK's own server.

``mcp.server.mcpserver.MCPServer`` (FastMCP's successor in ``mcp`` 2.x) in
its stateless Streamable HTTP mode with JSON responses, the configuration the
SDK recommends for a horizontally scaled tools-only server, served by
hypercorn with exactly ipintel's settings. The tool runs ipintel's own CIDR
function, so the two servers differ only in the MCP layer around it.

The same app answers every revision ``bench_mcp`` measures: a request whose
``MCP-Protocol-Version`` names a handshake-era revision (2025-11-25 and
older) takes the SDK's legacy stateless path, one naming 2026-07-28 its
single-exchange path (``mcp/server/_streamable_http_modern.py``), stateless
by construction and answering JSON here because of ``json_response=True``.

Run: ``IPINTEL_PORT=8123 python bench/sdk_mcp_app.py`` (needs the ``bench`` extra).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypercorn.asyncio import serve
from mcp.server.mcpserver import MCPServer

from ipintel.__main__ import hypercorn_config, run
from ipintel.capabilities import cidr


class CidrResult(TypedDict):
    """The structured result, typed so that the SDK derives an outputSchema and sends structuredContent."""

    network: str
    broadcast: str | None
    subnetMask: str
    wildcardMask: str | None
    prefixLength: int
    totalHosts: int
    usableHosts: int
    firstHost: str
    lastHost: str


# WARNING: the SDK logs every request at INFO; not paying for that is in the baseline's favour.
server = MCPServer("sdk-baseline", log_level="WARNING")


@server.tool()
def calculate_cidr(range: str) -> CidrResult:  # "range", the argument name of ipintel's tool
    """Subnet arithmetic for an IPv4 or IPv6 range in CIDR notation."""
    return CidrResult(**cidr.calculate(range))  # type: ignore[typeddict-item]


app = server.streamable_http_app(stateless_http=True, json_response=True)
# The settings the comparison rests on (ours: no sessions, JSON answers); bench_mcp checks the answers too.
assert server.session_manager.stateless and server.session_manager.json_response

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    config = hypercorn_config("127.0.0.1", int(os.environ["IPINTEL_PORT"]))
    run(serve(app, config), config)  # type: ignore[arg-type]  # on ipintel's event loop (worker_class) too
