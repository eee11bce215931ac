"""Issue 7: ``tools/call`` of ``calculate_cidr`` per second on our ``/mcp``, next to the MCP SDK's own server,
over MCP 2025-11-25 and over 2026-07-28, in one run.

Four servers run as real hypercorn processes with the same settings on
loopback: ours and the SDK's for 2025-11-25, ours and the SDK's for
2026-07-28 (one process each, so that each has its own share). They are
loaded all at once, sharing one CPU, ``ROUNDS`` times, as
:func:`common.simultaneous` does (see ``bench_throughput.py`` for why): one
``wrk`` per server on the other CPUs, with a Lua script that POSTs the
revision's JSON-RPC call and checks every answer (status 200 and the
substrings of the expected success; for 2026-07-28 also
``"resultType":"complete"``). A revision's figure is the median over the
rounds of ours divided by the SDK's in the same round, with the lowest and
highest. Without ``wrk`` a bounded aiohttp client loads the servers one
after the other instead, and the report says so.

Both servers of a revision get the same request bytes. A 2025-11-25 call is
a plain POST (no session, no ``initialize``), as clients of that revision
send it statelessly; a 2026-07-28 call carries the revision's per-request
envelope (``params._meta`` with the protocol version, client capabilities
and client info) and its routing headers (``Mcp-Method``, ``Mcp-Name``),
which the SDK requires. Before the load, one call to every server must
answer the tool's exact result as JSON without a session
(:func:`_check_answer`); a server that does not is left out and its
revision's row says why.

The baseline (``bench/sdk_mcp_app.py``) is the SDK's ``MCPServer`` in
stateless Streamable HTTP mode with JSON responses, exposing the same tool
on the same CIDR function, so the ratio measures the MCP layer. Ours runs
with rate limits on (generous ones) and its access log, as in production.

Target: ours at least 2x the SDK's on each revision. Needs the ``bench``
extra (``mcp``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    CLIENT_CPUS,
    ROOT,
    WORK,
    Load,
    _parse_wrk,
    _pinned,
    errors,
    ipintel_server,
    median_rps,
    paired_ratio,
    row,
    server,
)

SECONDS = 3.0
ROUNDS = 5
WARMUP = 1.0
CONNECTIONS = 16
TARGET = 2.0
RANGE = "192.168.1.0/24"
TOOL = "calculate_cidr"
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# Substrings every good answer has (both servers write compact JSON in structuredContent).
GOOD = ('"isError":false', '"usableHosts":254')


@dataclass(frozen=True)
class Revision:
    version: str
    body: bytes
    headers: dict[str, str]
    good: tuple[str, ...]
    modern: bool  # 2026-07-28 and later: a result says its resultType


def _call(meta: dict[str, object] | None = None) -> dict[str, object]:
    params: dict[str, object] = {"name": TOOL, "arguments": {"range": RANGE}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _body(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


REVISIONS = (
    Revision(
        "2025-11-25",
        _body(_call()),
        {**BASE_HEADERS, "MCP-Protocol-Version": "2025-11-25"},
        GOOD,
        modern=False,
    ),
    Revision(
        "2026-07-28",
        _body(
            _call(
                {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                }
            )
        ),
        {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": TOOL},
        (*GOOD, '"resultType":"complete"'),
        modern=True,
    ),
)


def _lua_script(revision: Revision) -> Path:
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(revision.body.decode())}",
        *(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in revision.headers.items()),
        "local threads = {}",
        "function setup(thread) table.insert(threads, thread) end",
        "function init(args) bad = 0 end",
        "function response(status, headers, body)",
        "  if status ~= 200"
        + "".join(f" or not string.find(body, {json.dumps(g)}, 1, true)" for g in revision.good)
        + " then bad = bad + 1 end",
        "end",
        "function done(summary, latency, requests)",
        "  local total = 0",
        '  for _, t in ipairs(threads) do total = total + t:get("bad") end',
        '  io.write(string.format("BAD %d\\n", total))',
        "end",
    ]
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"mcp_call_{revision.version}.lua"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _wrk_command(wrk: str, url: str, script: Path, seconds: float) -> list[str]:
    return [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", "--latency", "-s", str(script), url]


def _parse(out: str, err: str) -> Load:
    """wrk's figures; errors are the script's bad answers (non-200 or not the success) plus socket errors."""
    bad = re.search(r"^BAD (\d+)", out, re.M)
    if bad is None or "Requests/sec:" not in out:
        raise RuntimeError(f"wrk gave no figure:\n{out}{err}")
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failed = int(bad.group(1)) + (sum(int(g) for g in sockets.groups()) if sockets else 0)
    return dataclasses.replace(_parse_wrk(out), errors=failed)


def _wrk_all(wrk: str, targets: dict[str, tuple[str, Path]], seconds: float) -> dict[str, Load]:
    """One wrk per server, all started at once on the client CPUs."""
    procs = {
        name: subprocess.Popen(
            _pinned(_wrk_command(wrk, url, script, seconds), CLIENT_CPUS),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (url, script) in targets.items()
    }
    return {name: _parse(*proc.communicate(timeout=seconds + 30)) for name, proc in procs.items()}


def simultaneous(targets: dict[str, tuple[str, Revision]]) -> dict[str, list[Load]]:
    """:func:`common.simultaneous` with each server's own checked POST: the runs of each server, by round."""
    wrk = shutil.which("wrk")
    assert wrk is not None
    # One script per revision, written before any wrk reads it.
    scripts = {revision.version: _lua_script(revision) for _, revision in targets.values()}
    scripted = {name: (url, scripts[revision.version]) for name, (url, revision) in targets.items()}
    for name, target in scripted.items():  # warm-up, one at a time: caches, connections
        _wrk_all(wrk, {name: target}, WARMUP)
    runs: dict[str, list[Load]] = {name: [] for name in targets}
    for _ in range(ROUNDS):
        for name, result in _wrk_all(wrk, scripted, SECONDS).items():
            runs[name].append(result)
    return runs


async def _python_load(url: str, revision: Revision, seconds: float) -> Load:
    import aiohttp

    latencies: list[float] = []
    bad = 0
    deadline = time.perf_counter() + seconds

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal bad
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            async with session.post(url, data=revision.body, headers=revision.headers) as response:
                text = await response.text()
                if response.status != 200 or not all(g in text for g in revision.good):
                    bad += 1
            latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(CONNECTIONS)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    return Load(len(latencies) / elapsed, pick(0.5), pick(0.99), bad, "aiohttp")


def one_after_another(targets: dict[str, tuple[str, Revision]]) -> dict[str, list[Load]]:
    """Without wrk: :func:`common.compare`'s rotation, with the aiohttp client and each server's own POST."""
    for url, revision in targets.values():
        asyncio.run(_python_load(url, revision, WARMUP))
    names = list(targets)
    runs: dict[str, list[Load]] = {name: [] for name in names}
    for i in range(ROUNDS):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(asyncio.run(_python_load(*targets[name], SECONDS)))
    return runs


def _check_answer(url: str, revision: Revision) -> str | None:
    """One call before the load: the server answers the tool's real result, as JSON, without a session.

    ``None`` when it does, else what is wrong."""
    import httpx

    from ipintel.capabilities import cidr

    try:
        response = httpx.post(url, content=revision.body, headers=revision.headers, timeout=10)
    except httpx.HTTPError as exc:
        return f"no answer ({exc!r})"
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if not response.headers.get("content-type", "").startswith("application/json"):
        return f"not a JSON response ({response.headers.get('content-type')}): {response.text[:300]}"
    if "mcp-session-id" in response.headers:
        return "issued an Mcp-Session-Id: not stateless"
    result = response.json().get("result")
    if (
        not isinstance(result, dict)
        or result.get("isError")
        or result.get("structuredContent") != cidr.calculate(RANGE)
        or (revision.modern and result.get("resultType") != "complete")
    ):
        return f"not the tool's result: {response.text[:300]}"
    if missing := [g for g in revision.good if g not in response.text]:
        return f"the load's check would fail (missing {missing}): {response.text[:300]}"
    return None


def _figure(loads: list[Load]) -> str:
    figure = f"{median_rps(loads):,.0f} calls/s"
    if all(x.p50_ms is not None for x in loads):
        figure += f", p50 {statistics.median(x.p50_ms for x in loads):.1f} ms"  # type: ignore[misc]
    return f"{figure}, bad answers {errors(loads)}"


def main() -> list[dict[str, object]]:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return [row("MCP SDK baseline", "mcp not installed: pip install -e '.[bench]'", f">= {TARGET:.2f}x", False)]
    wrk = shutil.which("wrk")
    refused: dict[str, str] = {}
    with ExitStack() as stack:
        targets: dict[str, tuple[str, Revision]] = {}
        for revision in REVISIONS:
            sdk = stack.enter_context(server([sys.executable, str(ROOT / "bench" / "sdk_mcp_app.py")], pin=True))
            ours = stack.enter_context(ipintel_server(pin=True))
            for who, port in (("sdk", sdk), ("ours", ours)):
                url = f"http://127.0.0.1:{port}/mcp"
                problem = _check_answer(url, revision)
                if problem is None:
                    targets[f"{who} {revision.version}"] = (url, revision)
                else:
                    refused[f"{who} {revision.version}"] = problem
        runs = simultaneous(targets) if wrk else one_after_another(targets)
    how = (
        f"wrk, {CONNECTIONS} connections each, {len(targets)} servers at once on one CPU, {ROUNDS} rounds of {SECONDS:.0f} s"
        if wrk
        else f"aiohttp, {CONNECTIONS} connections, one after the other (no wrk), {ROUNDS} rounds of {SECONDS:.0f} s"
    )
    rows = []
    for revision in REVISIONS:
        sdk, ours = f"sdk {revision.version}", f"ours {revision.version}"
        rows.append(
            row(
                f"MCP SDK MCPServer, stateless + JSON responses, MCP {revision.version} (baseline; {how})",
                _figure(runs[sdk]) if sdk in runs else f"not measured: {refused[sdk]}",
                "-",
                None if sdk in runs else False,
            )
        )
        label = f"ipintel POST /mcp tools/call {TOOL} over MCP {revision.version} vs the SDK's server"
        target = f">= {TARGET:.2f}x"
        if sdk not in runs or ours not in runs:
            why = f"ours: {refused[ours]}" if ours in refused else "the baseline did not answer"
            rows.append(row(label, f"not measured: {why}", target, False))
            continue
        ratio, low, high = paired_ratio(runs, ours, sdk)
        rows.append(
            row(
                f"{label} (median of the ratios within a round; lowest-highest)",
                f"{_figure(runs[ours])}; {ratio:.2f}x ({low:.2f}-{high:.2f})",
                target,
                ratio >= TARGET and errors(runs[ours]) == 0 and errors(runs[sdk]) == 0,
            )
        )
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
