"""Blacklist check (docs/API.md#blacklist): DNSBL zones plus one reputation database, never
reporting an unverified answer as ``clear``.

A DNSBL answers through the DNS, and the DNS between us and the list lies in
well-known ways: public resolvers get Spamhaus's error code 127.255.255.254
instead of data, some resolvers rewrite NXDOMAIN into an advertising address,
lists that died answer everything with 127.0.0.2 or nothing at all. So:

- an answer is ``listed`` only when every A record is in 127.0.0.0/8, is not
  127.0.0.1 (RFC 5782: never listed) nor in 127.255.255.0/24 (Spamhaus's
  error codes), and, when the list documents its return codes
  (:data:`RETURN_CODES`), is one of them; the codes' meanings go to ``detail``;
- NXDOMAIN is ``clear``; everything else (timeout, SERVFAIL, REFUSED, NODATA,
  an error code, an answer outside 127/8) is ``unavailable``, with a detail;
- every zone is self-tested as RFC 5782 section 5 asks (127.0.0.2 must be
  listed, 127.0.0.1 must not) by :class:`SelfTests`, at start and then
  periodically in the background. A zone that failed is ``unavailable`` without
  being asked, until it passes again. A zone whose self-test has not come to a
  conclusion yet (just started, or its server did not answer the test) is
  still asked, with its self-test run concurrently in the same round trip
  (shared by concurrent checks): its answer stands only when the self-test
  passes; if the self-test cannot conclude, the answer is ``unavailable``
  ("not yet verified") rather than trusted.

All sources run concurrently under one deadline (``IPINTEL_BLACKLIST_DEADLINE``);
each DNS query also has its own timeout, the smaller of the DNS timeout and
what is left of the deadline. A source still running at the deadline is
``unavailable``; the answer never waits for it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ipintel import addresses
from ipintel.capabilities.reputation import Reputation, SourceResult
from ipintel.errors import ApiError
from ipintel.infra.resolver import DnsRecord, NxDomain, QueryTimeout, Resolver, ResolverError, ServerFailure
from ipintel.settings import ConfigError

log = logging.getLogger("ipintel.blacklist")

__all__ = [
    "RETURN_CODES",
    "Reputation",
    "SelfTest",
    "SelfTests",
    "SourceResult",
    "Zone",
    "build_zones",
    "check",
    "classify_answer",
    "is_definitive",
    "overall_status",
    "public_ipv4",
    "self_test",
]

# Return codes ------------------------------------------------------------------

_SPAMHAUS_SBL = {
    "127.0.0.2": "SBL: spam source or spam operation",
    "127.0.0.3": "SBL CSS: snowshoe spam source",
    "127.0.0.9": "SBL DROP: hijacked or criminal netblock",
    "127.0.0.30": "SBL BCL: botnet controller",
}
_SPAMHAUS_XBL = {
    "127.0.0.4": "XBL: exploited or infected host",
    "127.0.0.5": "XBL: exploited or infected host",
    "127.0.0.6": "XBL: exploited or infected host",
    "127.0.0.7": "XBL: exploited or infected host",
}
_SPAMHAUS_PBL = {
    "127.0.0.10": "PBL: end-user range that should not send mail directly (listed by the ISP)",
    "127.0.0.11": "PBL: end-user range that should not send mail directly (listed by Spamhaus)",
}
_DRONEBL = {
    # Class 1 ("testing") is answered as 127.0.0.1, which RFC 5782 reserves: never a listing here.
    "127.0.0.2": "sample data",
    "127.0.0.3": "IRC spam drone",
    "127.0.0.5": "bottler",
    "127.0.0.6": "unknown spambot or worm",
    "127.0.0.7": "DDoS drone",
    "127.0.0.8": "open SOCKS proxy",
    "127.0.0.9": "open HTTP proxy",
    "127.0.0.10": "proxy chain",
    "127.0.0.11": "web page proxy",
    "127.0.0.12": "open DNS resolver",
    "127.0.0.13": "brute-force attacker",
    "127.0.0.14": "open WinGate proxy",
    "127.0.0.15": "compromised router or gateway",
    "127.0.0.16": "autorooting worm",
    "127.0.0.17": "automatically detected botnet host",
    "127.0.0.18": "possibly compromised DNS/MX host seen on IRC",
    "127.0.0.19": "abused VPN service",
    "127.0.0.255": "uncategorised threat",
}

RETURN_CODES: dict[str, Mapping[str, str]] = {
    # Spamhaus: docs.spamhaus.com, "Available Zones" (the zone table of the DNSBL datasets).
    "zen.spamhaus.org": {**_SPAMHAUS_SBL, **_SPAMHAUS_XBL, **_SPAMHAUS_PBL},
    "sbl-xbl.spamhaus.org": {**_SPAMHAUS_SBL, **_SPAMHAUS_XBL},
    "sbl.spamhaus.org": _SPAMHAUS_SBL,
    "xbl.spamhaus.org": _SPAMHAUS_XBL,
    "pbl.spamhaus.org": _SPAMHAUS_PBL,
    # SpamCop and PSBL each use a single code.
    "bl.spamcop.net": {"127.0.0.2": "reported as a spam source by SpamCop users and spam traps"},
    "psbl.surriel.com": {"127.0.0.2": "sent mail to PSBL's spam traps"},
    # DroneBL: its documented threat classes; the last octet is the class.
    "dnsbl.dronebl.org": _DRONEBL,
    # all.s5h.net documents no code table (it says only that it follows RFC 5782),
    # so any valid 127/8 answer counts there, as for any zone not in this table.
}

# Spamhaus's error range: answers about the query, never about the address.
_SPAMHAUS_ERRORS = {
    "127.255.255.252": "typo in the DNSBL zone name",
    "127.255.255.254": "query through a public or open resolver, which Spamhaus refuses; use a local resolver",
    "127.255.255.255": "excessive number of queries (over the free-use quota)",
}

_LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
_ERROR_RANGE = ipaddress.IPv4Network("127.255.255.0/24")
_NEVER_LISTED = ipaddress.IPv4Address("127.0.0.1")
_TEST_LISTED = ipaddress.IPv4Address("127.0.0.2")

# Zones ---------------------------------------------------------------------------

_SPAMHAUS_SUFFIX = ".spamhaus.org"
_DQS_SUFFIX = ".dq.spamhaus.net"
# Used with fullmatch: "$" also matches before a final newline, so "bl\n" would pass as a label.
_DQS_KEY = re.compile(r"[a-z0-9]{1,63}")
_ZONE_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Zone:
    """One DNSBL: the name clients see, and the name we query.

    They differ only for Spamhaus DQS, whose query zone carries the account's
    key (``<key>.zen.dq.spamhaus.net``); :attr:`name` is the same zone without
    the key, so ``sources`` stays recognisable and the key never leaves the
    process (details are built from :attr:`name` only)."""

    name: str
    query_zone: str
    codes: Mapping[str, str] | None = None  # None: the list documents no codes
    spamhaus: bool = False

    def query_name(self, ip: ipaddress.IPv4Address) -> str:
        return ".".join(reversed(str(ip).split("."))) + "." + self.query_zone


class ZoneConfigError(ConfigError):
    """A configured zone or DQS key that cannot work; the message names the variable."""


def build_zones(zones: Iterable[str], dqs_key: str | None = None) -> tuple[Zone, ...]:
    """The configured zones, with Spamhaus's switched to DQS when a key is given.

    Raises :class:`ZoneConfigError` for a zone name that is not a DNS name or
    is too long to be queried, and for a DQS key that is not one DNS label."""
    key = dqs_key.strip().lower() if dqs_key else None
    if key is not None and not _DQS_KEY.fullmatch(key):
        raise ZoneConfigError("IPINTEL_SPAMHAUS_DQS_KEY must be letters and digits (one DNS label)")
    built: list[Zone] = []
    seen: set[str] = set()
    for raw in zones:
        name = raw.strip().lower().rstrip(".")
        labels = name.split(".")
        if len(labels) < 2 or not all(_ZONE_LABEL.fullmatch(label) for label in labels):
            raise ZoneConfigError(f"IPINTEL_DNSBL_ZONES: {raw!r} is not a DNS zone name")
        is_spamhaus = name.endswith(_SPAMHAUS_SUFFIX) or name.endswith(_DQS_SUFFIX)
        codes = RETURN_CODES.get(name)
        query_zone = name
        if key is not None and name.endswith(_SPAMHAUS_SUFFIX):
            dataset = name[: -len(_SPAMHAUS_SUFFIX)]
            name = dataset + _DQS_SUFFIX
            query_zone = f"{key}.{name}"
        elif name.endswith(_DQS_SUFFIX):
            codes = RETURN_CODES.get(name[: -len(_DQS_SUFFIX)] + _SPAMHAUS_SUFFIX)
        # "255.255.255.255." is the longest reversed address: the query name must stay within 253.
        if len(query_zone) + 16 > 253:
            raise ZoneConfigError(f"IPINTEL_DNSBL_ZONES: {raw!r} is too long to be queried")
        if name in seen:
            continue
        seen.add(name)
        built.append(Zone(name, query_zone, codes, is_spamhaus))
    return tuple(built)


# Answers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What one DNS query gave: records, NXDOMAIN, or a failure (``error`` says which)."""

    records: tuple[DnsRecord, ...] = ()
    nxdomain: bool = False
    error: str | None = None


async def _ask(resolver: Resolver, name: str, timeout: float) -> Answer:
    """One A query, with every resolver failure turned into words.

    The words never quote the query name or the resolver's message: for DQS
    the name holds the key."""
    try:
        records = await resolver.query(name, "A", timeout=timeout, source="dnsbl")
    except NxDomain:
        return Answer(nxdomain=True)
    except QueryTimeout:
        return Answer(error=f"no answer within {_seconds(timeout)}")
    except ServerFailure as failure:
        rcode = getattr(failure, "rcode", None) or "an error"
        return Answer(error=f"the DNS server answered {rcode}")
    except ResolverError as failure:
        return Answer(error=f"the DNS query failed ({type(failure).__name__})")
    return Answer(records=tuple(records))


def _answer_problem(zone: Zone, address: str, *, check_codes: bool) -> str | None:
    """Why one A record is not a valid listing, or ``None`` when it is one."""
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        return f"answered {address[:45]!r}, which is not an IPv4 address"
    if ip not in _LOOPBACK:
        return (
            f"answered {ip}, outside 127.0.0.0/8: the resolver rewrites NXDOMAIN "
            "(advertising or captive portal), so listed and clear cannot be told apart"
        )
    if ip == _NEVER_LISTED:
        return "answered 127.0.0.1, which RFC 5782 reserves as never listed: the list is shut down or refuses this resolver"
    if ip in _ERROR_RANGE:
        if zone.spamhaus:
            meaning = _SPAMHAUS_ERRORS.get(str(ip), "an error code about the query, not the address")
            return f"answered Spamhaus error code {ip}: {meaning}"
        return f"answered {ip}, in 127.255.255.0/24, which lists use for errors about the query"
    if check_codes and zone.codes is not None and str(ip) not in zone.codes:
        return f"answered {ip}, which is not one of the return codes the list documents"
    return None


def classify_answer(zone: Zone, records: Sequence[DnsRecord]) -> SourceResult:
    """The verdict of a zone's records for an address (NXDOMAIN is handled by the caller)."""
    addresses = [record.data for record in records if record.type == "A"]
    if not addresses:
        return SourceResult(zone.name, "unavailable", "answered without an A record (NODATA): neither listed nor clear")
    meanings: list[str] = []
    for address in addresses:
        problem = _answer_problem(zone, address, check_codes=True)
        if problem is not None:
            return SourceResult(zone.name, "unavailable", problem)
        meaning = (zone.codes or {}).get(address)
        text = f"{meaning} ({address})" if meaning else f"return code {address}"
        if text not in meanings:
            meanings.append(text)
    return SourceResult(zone.name, "listed", "; ".join(meanings))


def interpret(zone: Zone, answer: Answer) -> SourceResult:
    if answer.error is not None:
        return SourceResult(zone.name, "unavailable", answer.error)
    if answer.nxdomain:
        return SourceResult(zone.name, "clear")
    return classify_answer(zone, answer.records)


# Self-tests (RFC 5782 section 5) ---------------------------------------------------

Verdict = Literal["passed", "failed", "inconclusive"]


@dataclass(frozen=True)
class SelfTest:
    """The outcome of one self-test of a zone. ``inconclusive``: the list's
    server did not give a usable DNS answer (timeout, SERVFAIL), so nothing
    was learnt about the list itself."""

    verdict: Verdict
    detail: str
    at: float  # time.monotonic() when it ended


async def self_test(zone: Zone, *, resolver: Resolver, timeout: float) -> SelfTest:
    """RFC 5782 section 5: 127.0.0.2 must be listed, 127.0.0.1 must not be.

    The 127.0.0.2 probe accepts any answer in the listing range, not only the
    documented codes: the test is about whether the list is alive, and a list
    that answers its test entry with an undocumented code still validates
    real answers against its codes."""
    positive, negative = await asyncio.gather(
        _ask(resolver, zone.query_name(_TEST_LISTED), timeout),
        _ask(resolver, zone.query_name(_NEVER_LISTED), timeout),
    )
    failures: list[str] = []
    pending: list[str] = []
    if positive.error is not None:
        pending.append(f"test address 127.0.0.2: {positive.error}")
    elif positive.nxdomain:
        failures.append("it does not list the test address 127.0.0.2 (a dead list, or a wrong zone name)")
    else:
        addresses = [r.data for r in positive.records if r.type == "A"]
        if not addresses:
            failures.append("it answered NODATA for the test address 127.0.0.2")
        for address in addresses:
            problem = _answer_problem(zone, address, check_codes=False)
            if problem is not None:
                failures.append(f"for the test address 127.0.0.2 it {problem}")
                break
    if negative.error is not None:
        pending.append(f"test address 127.0.0.1: {negative.error}")
    elif not negative.nxdomain:
        addresses = [r.data for r in negative.records if r.type == "A"]
        problems = [_answer_problem(zone, a, check_codes=False) for a in addresses]
        shown = next((p for p in problems if p is not None and "outside 127.0.0.0/8" in p), None)
        if shown is not None:
            failures.append(f"for the test address 127.0.0.1, which must not exist, it {shown}")
        elif addresses:
            failures.append(
                f"it lists the test address 127.0.0.1 (answered {', '.join(addresses[:3])}): "
                "a dead list that lists everything"
            )
        else:
            failures.append("it answered NODATA instead of NXDOMAIN for the test address 127.0.0.1")
    now = time.monotonic()
    if failures:
        return SelfTest("failed", "; ".join(failures), now)
    if pending:
        return SelfTest("inconclusive", "; ".join(pending), now)
    return SelfTest("passed", "127.0.0.2 listed, 127.0.0.1 not listed", now)


class SelfTests:
    """The RFC 5782 self-tests of every zone, and what they last concluded.

    :meth:`start` runs them at once and then every ``interval`` seconds in
    the background (every ``retry`` seconds while some zone is inconclusive);
    requests never wait for that loop. :meth:`verify` gives a request the
    zone's verdict, running a test when the zone has none yet; concurrent
    callers share one test per zone, and a zone whose last test was
    inconclusive is not tested again on demand within ``retry`` seconds, so a
    dead server cannot multiply the queries. Memory is bounded by the number
    of zones."""

    def __init__(
        self,
        zones: Sequence[Zone],
        *,
        resolver: Resolver,
        timeout: float,
        interval: float = 30 * 60,
        retry: float = 60.0,
    ) -> None:
        self.zones = tuple(zones)
        self.resolver = resolver
        self.timeout = timeout
        self.interval = interval
        self.retry = retry
        self._conclusive: dict[str, SelfTest] = {}  # the latest passed/failed verdict per zone
        self._latest: dict[str, SelfTest] = {}  # the latest outcome of any kind
        self._running: dict[str, asyncio.Task[SelfTest]] = {}
        self._loop_task: asyncio.Task[None] | None = None

    def state(self, zone: Zone) -> SelfTest | None:
        """The latest conclusive verdict (passed or failed), or ``None``: untested."""
        return self._conclusive.get(zone.name)

    def verify(self, zone: Zone) -> asyncio.Future[SelfTest]:
        """The zone's verdict: a conclusive one at once, else a (shared) test."""
        known = self._conclusive.get(zone.name)
        latest = self._latest.get(zone.name)
        future: asyncio.Future[SelfTest]
        if known is not None:
            future = asyncio.get_running_loop().create_future()
            future.set_result(known)
            return future
        if zone.name in self._running:
            return self._running[zone.name]
        if latest is not None and time.monotonic() - latest.at < self.retry:
            future = asyncio.get_running_loop().create_future()
            future.set_result(latest)
            return future
        return self._run(zone)

    def _run(self, zone: Zone) -> asyncio.Task[SelfTest]:
        running = self._running.get(zone.name)
        if running is not None:
            return running
        task = asyncio.create_task(self._test(zone), name=f"dnsbl-self-test:{zone.name}")
        self._running[zone.name] = task
        task.add_done_callback(lambda _: self._running.pop(zone.name, None))
        return task

    async def _test(self, zone: Zone) -> SelfTest:
        try:
            outcome = await self_test(zone, resolver=self.resolver, timeout=self.timeout)
        except Exception:  # a bug must not kill the loop nor leave the zone wedged
            log.exception("self-test of %s crashed", zone.name)
            outcome = SelfTest("inconclusive", "the self-test crashed", time.monotonic())
        previous = self._conclusive.get(zone.name)
        self._latest[zone.name] = outcome
        if outcome.verdict != "inconclusive":
            self._conclusive[zone.name] = outcome
        if outcome.verdict == "failed" and (previous is None or previous.verdict != "failed"):
            log.warning("DNSBL %s failed its RFC 5782 self-test: %s", zone.name, outcome.detail)
        elif outcome.verdict == "passed" and previous is not None and previous.verdict == "failed":
            log.info("DNSBL %s passes its RFC 5782 self-test again", zone.name)
        return outcome

    async def run_once(self) -> list[SelfTest]:
        """Test every zone now (joining tests already running)."""
        return list(await asyncio.gather(*(self._run(zone) for zone in self.zones)))

    async def _loop(self) -> None:
        while True:
            try:
                outcomes = await self.run_once()
                wait = self.retry if any(o.verdict == "inconclusive" for o in outcomes) else self.interval
            except Exception:
                log.exception("DNSBL self-test round failed")
                wait = self.retry
            await asyncio.sleep(wait)

    def start(self) -> None:
        if self._loop_task is None and self.zones:
            self._loop_task = asyncio.create_task(self._loop(), name="dnsbl-self-tests")

    async def close(self) -> None:
        tasks = [t for t in (self._loop_task, *self._running.values()) if t is not None]
        self._loop_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# The check ----------------------------------------------------------------------------


def public_ipv4(text: str) -> ipaddress.IPv4Address:
    """The address a client asked about, if it can be checked: DNSBLs are queried
    by reversed IPv4 octets (IPv6 lists are few and differently keyed), and
    non-global addresses are in no list (400 / 422, docs/API.md#errors)."""
    address = addresses.parse_ip(text)
    if not isinstance(address, ipaddress.IPv4Address):
        raise ApiError("ipv6_not_supported", f"{address} is an IPv6 address; blacklists are checked for IPv4 only")
    addresses.require_public(address)
    return address


async def _check_zone(
    zone: Zone, ip: ipaddress.IPv4Address, *, resolver: Resolver, tests: SelfTests, timeout: float
) -> SourceResult:
    known = tests.state(zone)
    if known is not None and known.verdict == "failed":
        return SourceResult(zone.name, "unavailable", f"failed its RFC 5782 self-test: {known.detail}")
    if known is not None:
        return interpret(zone, await _ask(resolver, zone.query_name(ip), timeout))
    # Untested: ask, and verify the list in the same round trip. The shield keeps
    # the shared self-test running when this check hits its deadline.
    answer, test = await asyncio.gather(
        _ask(resolver, zone.query_name(ip), timeout), asyncio.shield(tests.verify(zone))
    )
    if test.verdict == "failed":
        return SourceResult(zone.name, "unavailable", f"failed its RFC 5782 self-test: {test.detail}")
    result = interpret(zone, answer)
    if test.verdict == "inconclusive" and result.status != "unavailable":
        return SourceResult(
            zone.name,
            "unavailable",
            f"answered, but is not yet verified by its RFC 5782 self-test ({test.detail})",
        )
    return result


async def check(
    ip: ipaddress.IPv4Address,
    *,
    zones: Sequence[Zone],
    resolver: Resolver,
    tests: SelfTests,
    reputation: Reputation | None,
    reputation_name: str = "reputation",
    deadline: float,
    dns_timeout: float,
) -> dict[str, Any]:
    """The blacklist record of a public IPv4 address (the caller has checked it)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + deadline
    per_query = max(0.001, min(dns_timeout, deadline))
    names = [zone.name for zone in zones]
    jobs: list[Awaitable[SourceResult]] = [
        _check_zone(zone, ip, resolver=resolver, tests=tests, timeout=per_query) for zone in zones
    ]
    if reputation is not None:
        names.append(reputation_name)
        jobs.append(reputation(ip, max(0.001, ends - loop.time())))
    tasks = [asyncio.ensure_future(job) for job in jobs]
    if tasks:
        await asyncio.wait(tasks, timeout=max(0.0, ends - loop.time()))
    sources: list[SourceResult] = []
    for name, task in zip(names, tasks, strict=True):
        if not task.done():
            task.cancel()
            sources.append(SourceResult(name, "unavailable", f"no answer within the {_seconds(deadline)} deadline"))
        elif task.cancelled():
            sources.append(SourceResult(name, "unavailable", "the check was cancelled"))
        elif task.exception() is not None:
            log.error("blacklist source %s crashed", name, exc_info=task.exception())
            sources.append(SourceResult(name, "unavailable", "internal error while asking this source"))
        else:
            sources.append(task.result())
    # Let cancelled queries unwind (their futures are cancellable) before answering.
    await asyncio.gather(*(t for t in tasks if not t.done()), return_exceptions=True)
    status = overall_status(sources)
    return {
        "ip": str(ip),
        "status": status,
        "listed": status == "listed",
        "sources": [source.to_dict() for source in sources],
    }


def overall_status(sources: Sequence[SourceResult]) -> str:
    """``listed`` when any source lists; ``clear`` only when all answered clear (docs/API.md#blacklist)."""
    if any(source.status == "listed" for source in sources):
        return "listed"
    if sources and all(source.status == "clear" for source in sources):
        return "clear"
    return "unknown"


def is_definitive(result: Mapping[str, Any]) -> bool:
    """A blacklist record may be cached only when no source was unavailable (docs/API.md#caching)."""
    return all(source.get("status") != "unavailable" for source in result.get("sources", ()))


def _seconds(value: float) -> str:
    return f"{round(value, 3):g} s"
