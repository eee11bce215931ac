"""`make accuracy`: how right ipintel's answers are on real public data, not on fixtures we wrote.

The driver owns what every section needs and writes one report:

- the default databases: ``fetch-geoip`` into ``DATA_DIR`` (default ``data/``), the City and AS files a new
  install has, which every section's server reads;
- the real data: ``REALDATA`` (default ``../shared/realdata`` beside the checkout: feed snapshots,
  ground truth and a manifest of where each file comes from), and ``ACCURACY_DATA`` (default
  ``../accuracy-data``: snapshots of sources that ``REALDATA`` does not hold, placed there by hand
  and never committed; a section says which of them it found and which it could not measure);
- a file server on 127.0.0.1 that serves both directories, so the service downloads its feeds from
  real copies and nothing leaves the machine;
- the real server process (``python -m ipintel``) with a fresh data directory, started per
  configuration and stopped after it (:func:`Context.service`).

Each section is a module with ``TITLE`` and ``async def measure(ctx) -> Section`` (figures +
markdown). Every section is measured twice from scratch: the figures must be the same both times,
and the report says so. The report goes to ``bench/accuracy.md``, one part per section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, server

BATCH = 1000  # addresses per POST /ip/batch (the service's default maximum)


@dataclass
class Section:
    """One module's result: ``figures`` (compared between the two runs) and its report text."""

    figures: Any
    markdown: str


class SectionModule(Protocol):
    TITLE: str

    async def measure(self, ctx: Context) -> Section: ...


@dataclass
class Context:
    realdata: Path
    extra: Path
    geodata: Path  # the data directory fetch-geoip filled: the default City and AS databases
    files_base: str = ""  # http://127.0.0.1:<port>: /realdata/<path> and /extra/<path>
    notes: list[str] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        return json.loads((self.realdata / "manifest.json").read_text())

    @property
    def asn_db(self) -> Path:
        """The default AS database (``fetch-geoip``: DB-IP ASN Lite, or the npm registry's AS table)."""
        return self.geodata / "dbip-asn-lite.mmdb"

    def city_dbs(self) -> str:
        """The default City files, as ``IPINTEL_GEOIP_CITY_DB`` lists them."""
        names = ("dbip-city-lite.mmdb", "dbip-city-lite-ipv6.mmdb")
        return ",".join(str(self.geodata / n) for n in names if (self.geodata / n).exists())

    def realdata_url(self, relative: str) -> str:
        return f"{self.files_base}/realdata/{relative}"

    def extra_url(self, relative: str) -> str:
        return f"{self.files_base}/extra/{relative}"

    @contextlib.asynccontextmanager
    async def service(self, env: dict[str, str]) -> AsyncIterator[Service]:
        """The real server process with ``env`` (on top of quiet defaults: no DNS server to reach, no
        rate limit in the way, a fresh data directory), ready and with every enabled feed loaded."""
        from tests.support.dns_server import DnsServer

        # A DNS server that knows no name: every PTR and Team Cymru query is answered (NXDOMAIN) at
        # once, so reverse DNS gives no signal, as it would for most of these addresses anyway.
        dns = DnsServer().start()
        with tempfile.TemporaryDirectory(prefix="ipintel-accuracy-") as data_dir, contextlib.ExitStack() as stack:
            stack.callback(dns.stop)
            full = {
                "IPINTEL_DATA_DIR": data_dir,
                "IPINTEL_GEOIP_CITY_DB": self.city_dbs(),
                "IPINTEL_LOG_FORMAT": "json",
                "IPINTEL_DNS_SERVERS": dns.env,
                "IPINTEL_RATE_LIMITS": "general=1000000,dns=1000000,registry=1000000",
                **env,
            }
            # A large ASN database on a busy machine can take a minute to open and index.
            with server([sys.executable, "-m", "ipintel"], full, ready_timeout=300) as port:
                async with aiohttp.ClientSession(
                    base_url=f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(total=120)
                ) as session:
                    service = Service(session)
                    await service.wait_for_feeds()
                    yield service


class Service:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.feeds: dict[str, dict[str, Any]] = {}

    async def wait_for_feeds(self, timeout: float = 180.0) -> None:
        """Until /readyz reports every enabled feed loaded (``ok``) or failed; a failed one is an error."""
        deadline = time.monotonic() + timeout
        while True:
            async with self.session.get("/readyz") as response:
                body = await response.json()
            checks = (body.get("data") or {}).get("checks") or {}
            feeds = {name.removeprefix("feed_"): c for name, c in checks.items() if name.startswith("feed_")}
            pending = [n for n, c in feeds.items() if c["status"] not in ("ok", "disabled") and "error" not in c]
            if response.status == 200 and feeds and not pending:
                failed = {n: c["error"] for n, c in feeds.items() if "error" in c and c["status"] != "ok"}
                if failed:
                    raise RuntimeError(f"feeds failed to load: {failed}")
                self.feeds = feeds
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"feeds not loaded after {timeout:.0f} s: {pending}")
            await asyncio.sleep(0.2)

    async def vpn_verdicts(self, addresses: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Address -> its ``/ip/{ip}/vpn`` record (through ``POST /ip/batch``), or ``{"error": code}``."""
        addresses = list(addresses)
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(addresses), BATCH):
            chunk = addresses[start : start + BATCH]
            async with self.session.post("/ip/batch", json={"ips": chunk, "include": ["vpn"]}) as response:
                response.raise_for_status()
                body = await response.json()
            for entry in body["data"]["results"]:
                if "error" in entry:
                    out[entry["ip"]] = {"error": entry["error"]["code"]}
                else:
                    vpn = entry["data"]["vpn"]
                    out[entry["ip"]] = vpn if "error" not in vpn else {"error": vpn["error"]["code"]}
        return out


@contextlib.asynccontextmanager
async def file_server(ctx: Context) -> AsyncIterator[None]:
    """Serve ``ctx.realdata`` at /realdata/ and ``ctx.extra`` at /extra/ on 127.0.0.1."""
    app = web.Application()
    app.router.add_static("/realdata/", ctx.realdata)
    if ctx.extra.is_dir():
        app.router.add_static("/extra/", ctx.extra)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ctx.files_base = f"http://127.0.0.1:{port}"
    try:
        yield
    finally:
        await runner.cleanup()


def _sections() -> list[SectionModule]:
    import accuracy_coverage
    import accuracy_detection

    return [accuracy_detection, accuracy_coverage]


async def run(ctx: Context, write: Path | None, log: Callable[[str], None]) -> bool:
    started = dt.datetime.now(dt.UTC)
    parts: list[str] = []
    same = True
    async with file_server(ctx):
        for module in _sections():
            results = []
            for attempt in (1, 2):
                t0 = time.monotonic()
                results.append(await module.measure(ctx))
                log(f"{module.TITLE}: run {attempt} took {time.monotonic() - t0:.0f} s")
            identical = results[0].figures == results[1].figures
            same = same and identical
            verdict = "identical" if identical else "DIFFERENT (see below)"
            parts.append(f"## {module.TITLE}\n\nMeasured twice from scratch; the figures of both runs are {verdict}.\n")
            parts.append(results[0].markdown)
            if not identical:
                parts.append("### Second run\n\n" + results[1].markdown)
    head = (
        "# Accuracy on real data\n\n"
        f"Run {started:%Y-%m-%d %H:%M} UTC with `make accuracy` (Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores), "
        "the real server process against feed snapshots served on 127.0.0.1 (no internet). "
        f"Real data: `REALDATA` ({_shown(ctx.realdata)}), brought-in snapshots: `ACCURACY_DATA` "
        f"({_shown(ctx.extra)}). Every figure names the dates of the data behind it.\n"
    )
    report = "\n".join([head, *parts])
    print(report)
    if write is not None:
        write.write_text(report)  # noqa: ASYNC240 - the end of the run
        log(f"written to {write}")
    return same


def _shown(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return os.path.relpath(path, ROOT)
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", default=os.environ.get("REALDATA") or str(ROOT.parent / "shared" / "realdata"))
    parser.add_argument("--extra", default=os.environ.get("ACCURACY_DATA") or str(ROOT.parent / "accuracy-data"))
    parser.add_argument("--data", default=os.environ.get("DATA_DIR") or str(ROOT / "data"), help="fetch-geoip's")
    parser.add_argument("--write", default=str(ROOT / "bench" / "accuracy.md"), help="the report ('' not to write)")
    args = parser.parse_args()
    geodata = Path(args.data).resolve()
    # The databases a new install has (fetched when missing or old; the sources' dates are in the report).
    subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch-geoip"), str(geodata)], check=True)
    ctx = Context(realdata=Path(args.realdata).resolve(), extra=Path(args.extra).resolve(), geodata=geodata)
    if not (ctx.realdata / "manifest.json").exists():
        print(f"no real data at {ctx.realdata} (REALDATA=...)", file=sys.stderr)
        return 2

    def log(message: str) -> None:
        print(f"accuracy: {message}", file=sys.stderr, flush=True)

    same = asyncio.run(run(ctx, Path(args.write) if args.write else None, log))
    if not same:
        log("the two runs gave different figures")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
