"""Shared benchmark machinery: real server processes on loopback and a load generator.

Load comes from ``wrk`` (a C load generator, installed by ``make bench`` from
Debian's packages when missing) so that the client costs as little CPU as
possible on a 2-core machine; without it a bounded aiohttp client is used and
the report says so. Every run is bounded in time and talks only to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def city_db() -> Path:
    """The real default database when present, else a fixture written now."""
    real = ROOT / "data" / "dbip-city-lite.mmdb"
    if real.exists():
        return real
    from tests.support.mmdb import write_city_db

    WORK.mkdir(parents=True, exist_ok=True)
    return write_city_db(WORK / "city.mmdb")


def asn_db() -> Path | None:
    """The default ASN database when fetched (scripts/fetch-geoip), else None: an ASN file of real size
    cannot be written quickly here."""
    real = ROOT / "data" / "dbip-asn-lite.mmdb"
    return real if real.exists() else None


def _wait_ready(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("server did not start")


# For measurements made at the same time (:func:`simultaneous`): the servers share
# the last CPU and the load generators use the others, so that every server gets
# the same share of the same core at the same moment.
_TASKSET = shutil.which("taskset")
_CPUS = os.cpu_count() or 1
SERVER_CPU = str(_CPUS - 1)
CLIENT_CPUS = f"0-{_CPUS - 2}" if _CPUS > 1 else "0"


def _pinned(cmd: list[str], cpus: str) -> list[str]:
    return [_TASKSET, "-c", cpus, *cmd] if _TASKSET else cmd


# The process id of each running server, by port (taskset execs the server, so the id is the server's).
PIDS: dict[int, int] = {}


@contextlib.contextmanager
def server(
    cmd: list[str], env: dict[str, str] | None = None, *, pin: bool = False, ready_timeout: float = 30.0
) -> Iterator[int]:
    """Run a server command (``{port}`` in it is replaced) and yield its port once it listens (within
    ``ready_timeout`` seconds); with ``pin``, on :data:`SERVER_CPU` only (when ``taskset`` is available)."""
    if pin:
        cmd = _pinned(cmd, SERVER_CPU)
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("IPINTEL_")}
    full_env.update(env or {})
    full_env["IPINTEL_PORT"] = str(port)
    full_env["IPINTEL_HOST"] = "127.0.0.1"
    proc = subprocess.Popen(
        [c.replace("{port}", str(port)) for c in cmd],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    PIDS[port] = proc.pid
    try:
        _wait_ready(port, proc, ready_timeout)
        yield port
    finally:
        PIDS.pop(port, None)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ipintel_env() -> dict[str, str]:
    """The settings every benchmarked ipintel server runs with: the city database, no feeds, no DNS
    server to reach, limits too high to refuse anything."""
    return {
        "IPINTEL_GEOIP_CITY_DB": str(city_db()),
        "IPINTEL_LOG_FORMAT": "json",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_DNS_TIMEOUT": "0.2",
        "IPINTEL_RATE_LIMITS": "general=1000000,dns=1000000,registry=1000000",
    }


def ipintel_server(env: dict[str, str] | None = None, *, pin: bool = False) -> contextlib.AbstractContextManager[int]:
    return server([sys.executable, "-m", "ipintel"], {**ipintel_env(), **(env or {})}, pin=pin)


def bare_server(api_headers: bool = False, *, pin: bool = False) -> contextlib.AbstractContextManager[int]:
    env = {"BARE_API_HEADERS": "1"} if api_headers else None
    return server([sys.executable, str(ROOT / "bench" / "bare_app.py")], env, pin=pin)


@dataclass(frozen=True)
class Load:
    requests_per_second: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    tool: str
    output: str = field(default="", repr=False)  # what wrk printed (a Lua script's done() included)


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.match(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def _wrk_command(wrk: str, url: str, seconds: float, connections: int, script: str | None = None) -> list[str]:
    """One wrk thread; with a Lua ``script`` (a request body, a check of each answer), a 30 s timeout."""
    extra = ["-s", script, "--timeout", "30s"] if script else []
    return [wrk, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", *extra, url]


def load(
    url: str, *, seconds: float = 5.0, connections: int = 32, rate: int | None = None, script: str | None = None
) -> Load:
    """Closed-loop load for a fixed time (or a fixed rate with wrk2-style -R when given); ``script``: a wrk
    Lua script (wrk only)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return asyncio.run(_python_load(url, seconds, connections))
    cmd = _wrk_command(wrk, url, seconds, connections, script)
    return _parse_wrk(subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout)


def simultaneous(
    urls: dict[str, str],
    *,
    rounds: int,
    seconds: float,
    connections: int | Mapping[str, int] = 32,
    scripts: Mapping[str, str] | None = None,
) -> dict[str, list[Load]] | None:
    """Load every URL at the same time, ``rounds`` times: the runs of each server, by round.

    The servers (started with ``pin=True``) share one CPU and one ``wrk`` per
    URL runs on the other CPUs, so every server gets the same share of the
    same core during the same seconds. A server's throughput is then its
    share of the core divided by what a request costs it, and the ratio of
    two servers' figures is the ratio of their costs per request: the host's
    ups and downs, which make one run differ from the next by ±20% on a
    2-core VM, reach both sides of the ratio at once. ``None`` without wrk.

    ``connections`` may be given per URL name, and ``scripts`` names a wrk
    Lua script for some of them (a POST body, a check of each answer)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    scripts = scripts or {}
    conns = {name: connections if isinstance(connections, int) else connections[name] for name in urls}
    for name, url in urls.items():  # warm-up: caches, connections
        load(url, seconds=1, connections=conns[name], script=scripts.get(name))
    runs: dict[str, list[Load]] = {name: [] for name in urls}
    for _ in range(rounds):
        procs = {
            name: subprocess.Popen(
                _pinned(_wrk_command(wrk, url, seconds, conns[name], scripts.get(name)), CLIENT_CPUS),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for name, url in urls.items()
        }
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=seconds + 30)
            runs[name].append(_parse_wrk(out))
    return runs


def _parse_wrk(out: str) -> Load:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    n_errors = int(errors.group(1)) if errors else 0
    if socket_errors:
        n_errors += sum(int(g) for g in socket_errors.groups())
    return Load(
        rps, _ms(p50.group(1)) if p50 else None, _ms(p99.group(1)) if p99 else None, n_errors, "wrk", output=out
    )


async def _python_load(url: str, seconds: float, connections: int) -> Load:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            async with session.get(url) as response:
                await response.read()
                if response.status >= 400:
                    errors += 1
            latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    return Load(len(latencies) / elapsed, pick(0.5), pick(0.99), errors, "aiohttp")


def compare(urls: dict[str, str], *, rounds: int, seconds: float, connections: int = 32) -> dict[str, list[Load]]:
    """Load every URL in turn, ``rounds`` times: the runs of each server, by round.

    On a small shared machine one run's throughput varies by ±20% with what
    the host is doing, so a ratio of two runs minutes apart (or of two best
    runs) measures the host as much as the servers. Servers are loaded
    back to back within a round, and the order rotates from round to round,
    so that none always runs first or after the same neighbour; a ratio is
    then taken within each round (:func:`paired_ratio`)."""
    for url in urls.values():
        load(url, seconds=1, connections=connections)  # warm-up: caches, connections
    names = list(urls)
    runs: dict[str, list[Load]] = {name: [] for name in names}
    for i in range(rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(load(urls[name], seconds=seconds, connections=connections))
    return runs


def median_rps(loads: list[Load]) -> float:
    return statistics.median(x.requests_per_second for x in loads)


def paired_ratio(runs: dict[str, list[Load]], name: str, base: str) -> tuple[float, float, float]:
    """Median, lowest and highest over the rounds of ``name``'s throughput
    divided by ``base``'s in the same round."""
    ratios = [
        a.requests_per_second / b.requests_per_second if b.requests_per_second else 0.0
        for a, b in zip(runs[name], runs[base], strict=True)
    ]
    return statistics.median(ratios), min(ratios), max(ratios)


def errors(loads: list[Load]) -> int:
    return sum(x.errors for x in loads)


def row(figure: str, value: str, target: str, ok: bool | None) -> dict[str, object]:
    return {"figure": figure, "value": value, "target": target, "ok": ok}
