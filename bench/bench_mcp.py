"""Issue 7: ``tools/call`` of ``calculate_cidr`` per second on our ``/mcp``, next to the MCP SDK's own server.

Both servers run as real hypercorn processes with the same settings on
loopback and get the same closed-loop load from the same generator (``wrk``
with a Lua script that POSTs the JSON-RPC call and checks every answer; a
bounded aiohttp client when ``wrk`` is missing). The baseline
(``bench/sdk_mcp_app.py``) is the SDK's ``MCPServer`` in stateless
Streamable HTTP mode with JSON responses, exposing the same tool on the same
CIDR function, so the ratio measures the MCP layer. Ours runs with rate
limits on (generous ones) and its access log, as in production.

Target: ours at least 2x the SDK's. Needs the ``bench`` extra (``mcp``).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, WORK, ipintel_server, row, server

SECONDS = 5.0
WARMUP = 1.0
CONNECTIONS = 16
RANGE = "192.168.1.0/24"
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "calculate_cidr", "arguments": {"range": RANGE}},
}
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
# Substrings every good answer has (both servers write compact JSON in structuredContent).
GOOD = ('"isError":false', '"usableHosts":254')


@dataclass(frozen=True)
class Result:
    requests_per_second: float
    p50_ms: float | None
    p99_ms: float | None
    bad: int  # non-200 or an answer that is not the expected success


def _lua_script() -> Path:
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(json.dumps(CALL))}",
        *(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in HEADERS.items()),
        "local threads = {}",
        "function setup(thread) table.insert(threads, thread) end",
        "function init(args) bad = 0 end",
        "function response(status, headers, body)",
        "  if status ~= 200"
        + "".join(f" or not string.find(body, {json.dumps(g)}, 1, true)" for g in GOOD)
        + " then bad = bad + 1 end",
        "end",
        "function done(summary, latency, requests)",
        "  local total = 0",
        '  for _, t in ipairs(threads) do total = total + t:get("bad") end',
        '  io.write(string.format("BAD %d\\n", total))',
        "end",
    ]
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / "mcp_call.lua"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    number = re.match(r"([\d.]+)(us|ms|s)", match.group(1))
    return float(number.group(1)) * _UNITS[number.group(2)] if number else None


def _wrk(url: str, seconds: float) -> Result:
    wrk = shutil.which("wrk")
    assert wrk is not None
    cmd = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", "--latency", "-s", str(_lua_script()), url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if rps is None:
        raise RuntimeError(f"wrk gave no figure:\n{out}")
    bad = int(re.search(r"^BAD (\d+)", out, re.M).group(1))  # type: ignore[union-attr]
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if socket_errors:
        bad += sum(int(g) for g in socket_errors.groups())
    return Result(
        float(rps.group(1)),
        _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M)),
        _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M)),
        bad,
    )


async def _python_load(url: str, seconds: float) -> Result:
    import aiohttp

    body = json.dumps(CALL).encode()
    latencies: list[float] = []
    bad = 0
    deadline = time.perf_counter() + seconds

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal bad
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            async with session.post(url, data=body, headers=HEADERS) as response:
                text = await response.text()
                if response.status != 200 or not all(g in text for g in GOOD):
                    bad += 1
            latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(CONNECTIONS)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    return Result(len(latencies) / elapsed, pick(0.5), pick(0.99), bad)


def load(url: str, seconds: float) -> Result:
    if shutil.which("wrk"):
        return _wrk(url, seconds)
    return asyncio.run(_python_load(url, seconds))


def _check_answer(url: str) -> None:
    """One call before the load: the server answers the real tool result, not an error."""
    import httpx

    from ipintel.capabilities import cidr

    answer = httpx.post(url, content=json.dumps(CALL), headers=HEADERS, timeout=10).json()
    result = answer["result"]
    if result.get("isError") or result.get("structuredContent") != cidr.calculate(RANGE):
        raise RuntimeError(f"{url} did not answer the tool's result: {answer}")


def measure(url: str) -> Result:
    _check_answer(url)
    load(url, WARMUP)
    return load(url, SECONDS)


def _figure(result: Result) -> str:
    latency = f", p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms" if result.p50_ms is not None else ""
    return f"{result.requests_per_second:,.0f} calls/s{latency}, bad answers {result.bad}"


def main() -> list[dict[str, object]]:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return [row("MCP SDK baseline", "mcp not installed: pip install -e '.[bench]'", ">= 2.00x", False)]
    with server([sys.executable, str(ROOT / "bench" / "sdk_mcp_app.py")]) as port:
        theirs = measure(f"http://127.0.0.1:{port}/mcp")
    with ipintel_server() as port:
        ours = measure(f"http://127.0.0.1:{port}/mcp")
    ratio = ours.requests_per_second / theirs.requests_per_second
    generator = "wrk" if shutil.which("wrk") else "aiohttp"
    return [
        row("MCP SDK MCPServer, stateless + JSON responses (baseline)", _figure(theirs), "-", None),
        row("ipintel POST /mcp tools/call calculate_cidr", _figure(ours), "-", None),
        row(
            f"/mcp tools/call throughput vs the SDK's server ({generator}, {CONNECTIONS} connections)",
            f"{ratio:.2f}x",
            ">= 2.00x",
            ratio >= 2.0 and ours.bad == 0 and theirs.bad == 0,
        ),
    ]


if __name__ == "__main__":
    for r in main():
        print(r)
