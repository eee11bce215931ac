"""RFC 5782 section 5 self-tests: a list must list 127.0.0.2 and must not list 127.0.0.1.

:class:`SelfTests` tests every zone at start and periodically in the background; what a zone's verdict does to
its answers is docs/API.md#blacklist (and :mod:`.check`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ipintel.capabilities.blacklist.answers import answer_problem, ask
from ipintel.capabilities.blacklist.codes import NEVER_LISTED, TEST_LISTED
from ipintel.capabilities.blacklist.zones import Zone
from ipintel.infra.resolver import Resolver

log = logging.getLogger("ipintel.blacklist")

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
        ask(resolver, zone.query_name(TEST_LISTED), timeout),
        ask(resolver, zone.query_name(NEVER_LISTED), timeout),
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
            problem = answer_problem(zone, address, check_codes=False)
            if problem is not None:
                failures.append(f"for the test address 127.0.0.2 it {problem}")
                break
    if negative.error is not None:
        pending.append(f"test address 127.0.0.1: {negative.error}")
    elif not negative.nxdomain:
        addresses = [r.data for r in negative.records if r.type == "A"]
        problems = [answer_problem(zone, a, check_codes=False) for a in addresses]
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
    """The RFC 5782 self-tests of every zone, and what they last concluded. :meth:`start` runs them at once and
    then every ``interval`` seconds in the background (every ``retry`` seconds while some zone is inconclusive);
    :meth:`verify` gives a request the zone's verdict, running a test when the zone has none yet."""

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
        # One entry per zone in each: memory is bounded by the number of zones.
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
        if zone.name in self._running:  # concurrent callers share one test per zone
            return self._running[zone.name]
        # An inconclusive zone is not tested again on demand within ``retry``: a dead server cannot multiply the
        # queries.
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
        # Requests never wait for this loop: they ask verify().
        if self._loop_task is None and self.zones:
            self._loop_task = asyncio.create_task(self._loop(), name="dnsbl-self-tests")

    async def close(self) -> None:
        tasks = [t for t in (self._loop_task, *self._running.values()) if t is not None]
        self._loop_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
