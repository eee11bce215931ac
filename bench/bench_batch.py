"""Issue 14: profiles and batches (docs/API.md#profile-and-batch) — throughput, latency, memory.

Every server is a real ipintel process on 127.0.0.1 in front of the local fake
internet (tests/support/fake_internet.py: DNS with the DNSBL, PTR and Team
Cymru zones, RDAP and its bootstrap, the reputation API, the feeds). Its
GeoIP City database is written here: 3.0.0.0/8 in 256 city records, so that
every address of the benchmark has a GeoIP record. The DNS server answers
the Team Cymru origin of every such address with an announcement of its own
/24 by AS16509 (so no address's ASN is answered from another's cached
prefix) and its PTR with an EC2-style name. Each figure uses addresses no
server has seen before (:func:`fresh`), each in a /24 of its own.

1. Throughput. A batch of 1,000 cached addresses (include geo, vpn) against
   single ``GET /ip/{ip}`` requests cycling through the same 1,000 cached
   addresses, on two server processes warmed with the same batch, pinned to
   one CPU and loaded at the same time by one wrk each
   (:func:`common.simultaneous`), ``ROUNDS`` times; a wrk Lua script sends the
   batch and checks every answer (200, 1,000 results, no part in error). The
   figure is the median over the rounds of the ratio of addresses per second
   within a round, with its range. Target: at least 10x.
2. Latency of an uncached profile (all five parts) with every upstream
   answering ``DELAY`` late: DNS (DNSBL zones, PTR, the Cymru origin; the AS
   name is already known, as it is for nearly every address of a running
   service), the RDAP registry (the bootstrap already fetched) and the
   reputation API. Profiles of fresh addresses at ``DELAY`` alternate with
   profiles of other fresh addresses with every upstream at 0 ms; the
   overhead is the median of the latter (the whole uncached profile with
   instant upstreams: the service's work and the fake internet's, the
   client's round trip). Target: median <= 1.5 x ``DELAY`` + that overhead.
3. Memory. The server's RSS (VmRSS) after a small warm-up, after one uncached
   1,000-address batch (geo, vpn: the local parts), after the same batch again
   (cached), and along a burst of ``BURST`` batches of 1,000 distinct fresh
   addresses, 4 at a time. Targets: one batch raises RSS by at most 20 MiB;
   the burst leaves it flat: once the caches are at their bounds (10,000
   entries each: by the 10th batch), the second half of the burst adds at
   most ``FLAT_MIB``.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PIDS, WORK, ipintel_server, median_rps, paired_ratio, row, simultaneous

from tests.support.dns_server import Answer
from tests.support.fake_internet import ARIN_NETWORK, FakeInternet
from tests.support.mmdb import city_record, write_city_db
from tests.support.rdap_server import Reply
from tests.support.reputation_server import SFS_CLEAN

BATCH = 1000
INCLUDE = ["geo", "vpn"]
ROUNDS = 5
SECONDS = 4.0
BATCH_CONNECTIONS = 4  # a batch costs tens of ms: a few connections keep the server busy without queueing
SINGLE_CONNECTIONS = 32
RATIO_TARGET = 10.0

DELAY = 0.050
PROFILES = 20
PART_SAMPLES = 10
PARTS = {
    "geo": "/ip/{}",
    "vpn": "/ip/{}/vpn",
    "whois": "/whois/{}",
    "blacklist": "/blacklist/{}",
    "ptr": "/dns/{}/reverse",
}

BURST = 50
BURST_CONCURRENCY = 4
BATCH_RSS_MIB = 20.0
FLAT_MIB = 2.0
MIB = 2**20

# Address i lies in its own /24 of 3.0.0.0/8 (40503 is odd, so i -> /24 is a bijection for i < 65,536).
_counter = itertools.count()


def fresh(count: int) -> list[str]:
    """``count`` addresses never handed out before in this run, each in a /24 of its own."""
    out = []
    for _ in range(count):
        i = next(_counter)
        if i >= 65536:
            raise RuntimeError("out of fresh /24s in 3.0.0.0/8")
        slash24 = (i * 40503) & 0xFFFF
        out.append(f"3.{slash24 >> 8}.{slash24 & 0xFF}.{1 + (i * 7) % 254}")
    return out


def city_db() -> Path:
    """3.0.0.0/8 as 256 /16 city records."""
    WORK.mkdir(parents=True, exist_ok=True)
    networks = {
        f"3.{k}.0.0/16": city_record(
            country="US",
            city=f"City {k}",
            region="Virginia",
            latitude=38.0 + k / 256,
            longitude=-77.0 - k / 256,
            time_zone="America/New_York",
        )
        for k in range(256)
    }
    return write_city_db(WORK / "batch-city.mmdb", networks)


def _answers(name: str, qtype: str) -> Answer | None:
    """The Team Cymru origin (its own /24, AS16509) and the PTR name of every address in 3.0.0.0/8."""
    labels = name.split(".")
    if len(labels) < 4 or labels[3] != "3" or not all(label.isdigit() for label in labels[:4]):
        return None
    a, b, c, d = reversed(labels[:4])
    if qtype == "TXT" and name.endswith(".origin.asn.cymru.test"):
        return Answer.of(name, "TXT", [f"16509 | {a}.{b}.{c}.0/24 | US | arin | 2017-12-20"], ttl=0)
    if qtype == "PTR" and name.endswith(".in-addr.arpa"):
        return Answer.of(name, "PTR", f"ec2-{a}-{b}-{c}-{d}.compute-1.amazonaws.com", ttl=0)
    return None


def upstream_delay(net: FakeInternet, delay: float) -> None:
    """Every upstream a profile asks answers ``delay`` late: DNS, the RDAP registries (any address:
    ARIN's 3.0.0.0/9 network), the reputation API. The RDAP bootstrap files stay prompt."""
    net.dns.delay = delay

    def web_side() -> None:
        assert net.rdap is not None and net.reputation is not None
        net.rdap.default = Reply.json(ARIN_NETWORK, delay=delay)
        net.reputation.respond(body=SFS_CLEAN, delay=delay)

    net.call(web_side)


@contextlib.contextmanager
def batch_server(net: FakeInternet, db: Path, *, pin: bool = False) -> Iterator[int]:
    """An ipintel process on the fake internet, its feeds loaded (so verdicts are cached 24 h)."""
    with tempfile.TemporaryDirectory(prefix="ipintel-bench-") as data_dir:
        env = {**net.env, "IPINTEL_GEOIP_CITY_DB": str(db), "IPINTEL_DATA_DIR": data_dir}
        with ipintel_server(env, pin=pin) as port:
            deadline = time.monotonic() + 30
            while True:
                status, checks = _get_json(port, "/readyz")
                feeds = [
                    v["status"] for k, v in checks.get("data", {}).get("checks", {}).items() if k.startswith("feed_")
                ]
                if status == 200 and feeds and all(s in ("ok", "disabled") for s in feeds):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"feeds not loaded within 30 s: {checks}")
                time.sleep(0.2)
            yield port


def _get_json(port: int, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def post_batch(conn: http.client.HTTPConnection, ips: list[str]) -> None:
    """One batch; raises unless it answers 200 with a result per address and no part in error."""
    body = json.dumps({"ips": ips, "include": INCLUDE})
    conn.request("POST", "/ip/batch", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"batch answered {response.status}: {data[:300]!r}")
    results = json.loads(data)["data"]["results"]
    bad = [r for r in results if "data" not in r or any("error" in r["data"][part] for part in INCLUDE)]
    if len(results) != len(ips) or bad:
        raise RuntimeError(f"batch: {len(results)} results for {len(ips)} addresses, {len(bad)} bad: {bad[:2]}")


# 1. Throughput -----------------------------------------------------------------------------------

_BATCH_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[%(body)s]]
local threads = {}
function setup(thread) table.insert(threads, thread) end
good, bad = 0, 0
function response(status, headers, body)
  local _, results = string.gsub(body, '"data":{"ip":', "")
  local _, errors = string.gsub(body, '"error":', "")
  if status == 200 and results == %(count)d and errors == 0 then good = good + 1 else bad = bad + 1 end
end
function done(summary, latency, requests)
  local g, b = 0, 0
  for _, t in ipairs(threads) do g = g + t:get("good"); b = b + t:get("bad") end
  io.write(string.format("CHECKED good=%%d bad=%%d\\n", g, b))
end
"""

_SINGLE_LUA = """
local paths = {%(paths)s}
local i = 0
function request()
  i = i %% #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def _checked(output: str) -> tuple[int, int]:
    for line in output.splitlines():
        if line.startswith("CHECKED "):
            fields = dict(part.split("=") for part in line.split()[1:])
            return int(fields["good"]), int(fields["bad"])
    return 0, 0


def throughput(net: FakeInternet, db: Path) -> list[dict[str, object]]:
    ips = fresh(BATCH)
    WORK.mkdir(parents=True, exist_ok=True)
    batch_lua = WORK / "batch.lua"
    batch_lua.write_text(_BATCH_LUA % {"body": json.dumps({"ips": ips, "include": INCLUDE}), "count": BATCH})
    single_lua = WORK / "single.lua"
    single_lua.write_text(_SINGLE_LUA % {"paths": ",".join(f'"/ip/{ip}"' for ip in ips)})
    with batch_server(net, db, pin=True) as batch_port, batch_server(net, db, pin=True) as single_port:
        for port in (batch_port, single_port):  # the same addresses cached in both
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            post_batch(conn, ips)
            conn.close()
        runs = simultaneous(
            {
                "batch": f"http://127.0.0.1:{batch_port}/ip/batch",
                "single": f"http://127.0.0.1:{single_port}/ip/{ips[0]}",
            },
            rounds=ROUNDS,
            seconds=SECONDS,
            connections={"batch": BATCH_CONNECTIONS, "single": SINGLE_CONNECTIONS},
            scripts={"batch": str(batch_lua), "single": str(single_lua)},
        )
    if runs is None:
        return [row("batch vs single GET /ip/{ip}: needs wrk", "not measured", f">= {RATIO_TARGET:.0f}x", False)]
    ratio, low, high = paired_ratio(runs, "batch", "single")
    ratio, low, high = ratio * BATCH, low * BATCH, high * BATCH
    checks = [_checked(load.output) for load in runs["batch"]]
    good, bad = sum(g for g, _ in checks), sum(b for _, b in checks)
    single_errors = sum(load.errors for load in runs["single"])
    batch_rps = median_rps(runs["batch"])
    p50s = [load.p50_ms for load in runs["batch"] if load.p50_ms is not None]
    return [
        row(
            f"POST /ip/batch, {BATCH:,} cached addresses (geo, vpn), wrk {BATCH_CONNECTIONS} connections "
            f"(all at once with the next on one CPU, {ROUNDS} rounds of {SECONDS:.0f} s)",
            f"{batch_rps:,.1f} batches/s = {batch_rps * BATCH:,.0f} addresses/s, "
            f"p50 {statistics.median(p50s) if p50s else float('nan'):.0f} ms; "
            f"answers checked (200, {BATCH:,} results, no error): {good:,} good, {bad} bad",
            "-",
            None if bad == 0 and good > 0 else False,
        ),
        row(
            f"GET /ip/{{ip}} cycling through the same {BATCH:,} cached addresses, wrk {SINGLE_CONNECTIONS} connections",
            f"{median_rps(runs['single']):,.0f} addresses/s (errors {single_errors})",
            "-",
            None if single_errors == 0 else False,
        ),
        row(
            "batch vs single: addresses/s (median of the ratios within a round; lowest-highest)",
            f"{ratio:.1f}x ({low:.1f}-{high:.1f})",
            f">= {RATIO_TARGET:.0f}x",
            ratio >= RATIO_TARGET and bad == 0 and good > 0 and single_errors == 0,
        ),
    ]


# 2. Latency of an uncached profile ---------------------------------------------------------------


def _timed_get(conn: http.client.HTTPConnection, path: str) -> tuple[float, int, Any]:
    started = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - started
    return elapsed, response.status, json.loads(data)


def _complete(profile: dict[str, Any]) -> bool:
    """Every part answered, and the blacklist from every source (none unavailable)."""
    data = profile.get("data", {})
    if any(part not in data or "error" in data[part] for part in PARTS):
        return False
    return data["blacklist"]["status"] == "clear" and data["geo"].get("asn") is not None


def profile_latency(net: FakeInternet, db: Path) -> list[dict[str, object]]:
    delayed: list[float] = []
    instant: list[float] = []
    incomplete = 0
    parts: dict[str, list[float]] = {name: [] for name in PARTS}
    with batch_server(net, db) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        upstream_delay(net, 0.0)
        for ip in fresh(3):  # warm: RDAP bootstrap, AS16509's name, DNSBL self-tests, connections
            _, status, body = _timed_get(conn, f"/ip/{ip}/profile")
            if status != 200 or not _complete(body):
                raise RuntimeError(f"warm-up profile incomplete: {status} {body}")
        try:
            for i in range(PROFILES):  # interleaved, first one then the other, so both see the same machine
                for delay in (DELAY, 0.0) if i % 2 == 0 else (0.0, DELAY):
                    upstream_delay(net, delay)
                    (ip,) = fresh(1)
                    elapsed, status, body = _timed_get(conn, f"/ip/{ip}/profile")
                    incomplete += status != 200 or not _complete(body)
                    (delayed if delay else instant).append(elapsed)
            upstream_delay(net, DELAY)
            for name, route in PARTS.items():  # each part alone, through its own route
                for ip in fresh(PART_SAMPLES):
                    elapsed, status, _ = _timed_get(conn, route.format(ip))
                    incomplete += status != 200
                    parts[name].append(elapsed)
        finally:
            upstream_delay(net, 0.0)
            conn.close()
    ms = 1000
    overhead = statistics.median(instant)
    median = statistics.median(delayed)
    target = 1.5 * DELAY + overhead
    by_part = ", ".join(f"{name} {statistics.median(times) * ms:.1f}" for name, times in parts.items())
    return [
        row(
            f"GET /ip/{{ip}}/profile (all parts), uncached, upstreams answering at once: the overhead "
            f"(median of {PROFILES}; max)",
            f"{overhead * ms:.1f} ms; max {max(instant) * ms:.1f} ms",
            "-",
            None,
        ),
        row(
            f"each part alone on its own route, uncached, upstreams {DELAY * ms:.0f} ms late "
            f"(median of {PART_SAMPLES}, ms)",
            by_part,
            "-",
            None,
        ),
        row(
            f"GET /ip/{{ip}}/profile (all parts), uncached, every upstream {DELAY * ms:.0f} ms late "
            f"(median of {PROFILES}; max)",
            f"{median * ms:.1f} ms; max {max(delayed) * ms:.1f} ms; answers incomplete {incomplete}",
            f"<= 1.5 x {DELAY * ms:.0f} ms + overhead {overhead * ms:.1f} ms = {target * ms:.1f} ms",
            median <= target and incomplete == 0,
        ),
    ]


# 3. Memory ---------------------------------------------------------------------------------------


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def memory(net: FakeInternet, db: Path) -> list[dict[str, object]]:
    upstream_delay(net, 0.0)
    with batch_server(net, db) as port:
        pid = PIDS[port]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        post_batch(conn, fresh(50))  # warm: every code path of a batch has run once
        _timed_get(conn, f"/ip/{fresh(1)[0]}/profile")
        time.sleep(0.5)
        before = rss(pid)
        one = fresh(BATCH)
        started = time.perf_counter()
        post_batch(conn, one)
        uncached_seconds = time.perf_counter() - started
        after_uncached = rss(pid)
        post_batch(conn, one)
        after_cached = rss(pid)
        conn.close()

        sets = [fresh(BATCH) for _ in range(BURST)]
        samples: list[int] = []

        def send(ips: list[str]) -> None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                post_batch(c, ips)
            finally:
                c.close()

        started = time.perf_counter()
        with ThreadPoolExecutor(BURST_CONCURRENCY) as pool:
            for future in as_completed([pool.submit(send, ips) for ips in sets]):
                future.result()
                samples.append(rss(pid))
        burst_seconds = time.perf_counter() - started
        time.sleep(0.5)
        after_burst = rss(pid)
    half = BURST // 2
    second_half = samples[-1] - samples[half - 1]
    one_delta = (after_uncached - before) / MIB
    cached_delta = (after_cached - after_uncached) / MIB
    return [
        row(
            f"server RSS, one uncached batch of {BATCH:,} addresses (geo, vpn; {uncached_seconds:.1f} s)",
            f"+{one_delta:.1f} MiB ({before / MIB:.0f} -> {after_uncached / MIB:.0f} MiB)",
            f"<= {BATCH_RSS_MIB:.0f} MiB",
            one_delta <= BATCH_RSS_MIB,
        ),
        row(
            "server RSS, the same batch again (cached)",
            f"{cached_delta:+.1f} MiB ({after_cached / MIB:.0f} MiB)",
            f"<= {BATCH_RSS_MIB:.0f} MiB",
            cached_delta <= BATCH_RSS_MIB,
        ),
        row(
            f"server RSS along a burst of {BURST} batches of {BATCH:,} distinct uncached addresses, "
            f"{BURST_CONCURRENCY} at once ({burst_seconds:.0f} s)",
            f"after batch 10 {samples[9] / MIB:.0f} MiB, {half} {samples[half - 1] / MIB:.0f} MiB, "
            f"{BURST} {samples[-1] / MIB:.0f} MiB (peak {max(samples) / MIB:.0f}, at rest after "
            f"{after_burst / MIB:.0f}); the whole burst {(after_burst - after_cached) / MIB:+.1f} MiB, "
            f"its second half {second_half / MIB:+.1f} MiB",
            f"flat: second half (caches at their bounds) <= {FLAT_MIB:.0f} MiB",
            second_half / MIB <= FLAT_MIB,
        ),
    ]


def main() -> list[dict[str, object]]:
    db = city_db()
    with FakeInternet() as net:
        net.dns.hook(_answers)
        rows = throughput(net, db)
        rows += profile_latency(net, db)
        rows += memory(net, db)
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
