"""One local fake internet for tests, fuzzing, the soak run and benchmarks.

Everything the service talks to, on 127.0.0.1 only, composed from the
reusable support servers:

- a DNS server (:class:`~tests.support.dns_server.DnsServer`) with forward
  zones, reverse (PTR) zones, DNSBL zones and Team-Cymru-style ASN zones;
- an RDAP world (:mod:`tests.support.rdap_server`): IANA bootstrap files and
  two registries;
- a StopForumSpam-style reputation API
  (:class:`~tests.support.reputation_server.ReputationServer`);
- every VPN/hosting/relay feed in its published format, Apple's iCloud
  Private Relay CSV at a realistic shape (about 22,000 rows) among them
  (:class:`~tests.support.feeds.FeedServer`).

The aiohttp servers run on an event loop in a thread of their own, so a
synchronous test, a subprocess server and a benchmark can all use them. The
service is pointed at it through the ``IPINTEL_*`` settings only
(:attr:`FakeInternet.env`, :meth:`FakeInternet.settings`). Each upstream can
be made slow, down, or to answer garbage on command, and restored::

    with FakeInternet() as net:
        with server_process(net.env) as (client, proc):
            net.dns_down()        # every query goes unanswered (timeouts)
            net.rdap_failing()    # registries answer 503
            net.apply("feeds_garbage", "reputation_slow")   # by name, see FAULTS
            net.restore()

Each upstream has its three faults: ``<part>_slow`` (late past the service's
timeout), ``<part>_down`` (no answer: DNS silence, a dropped connection, a
503) and ``<part>_garbage`` (an answer in the wrong format); ``rdap_failing``
adds registry 5xx. :data:`FAULTS` names them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ipintel.settings import Settings, parse_feed_urls
from tests.support.dns_server import Answer, DnsServer
from tests.support.dnsbl import AD_SERVER, healthy_list
from tests.support.feeds import FeedServer
from tests.support.feeds import Reply as FeedReply
from tests.support.rdap_server import RdapServer, Reply, rdap_fixture, rdap_server
from tests.support.reputation_server import SFS_CLEAN, ReputationServer

# Addresses and names the fake internet knows about.
LISTED_IP = "45.33.32.156"  # listed by the healthy DNSBL
ARIN_IP = "3.3.3.3"
RIPE_IP = "193.0.6.139"
DOMAIN = "example.com"

# The two registries and the space each holds; what they answer for the known networks:
# real answers, kept in tests/fixtures/rdap/.
REGISTRIES = {"arin": ["3.0.0.0/8", "2600::/12"], "ripe": ["193.0.0.0/8", "2001:600::/23"]}
ARIN_NETWORK = rdap_fixture("arin_3_0_0_0")  # 3.0.0.0 - 3.127.255.255, Amazon
RIPE_NETWORK = rdap_fixture("ripe_193_0_0_0")  # 193.0.0.0 - 193.0.7.255, the RIPE NCC
ARIN_AUTNUM = rdap_fixture("arin_autnum_15169")  # AS15169, Google
RIPE_AUTNUM = rdap_fixture("ripe_autnum_3333")  # AS3333, the RIPE NCC


class FakeInternet:
    """Start with ``with FakeInternet() as net:``; see the module docstring."""

    def __init__(self) -> None:
        self.dns = DnsServer()
        self.rdap: RdapServer | None = None
        self.reputation: ReputationServer | None = None
        self.feeds = FeedServer()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-internet", daemon=True)
        self._stack = contextlib.AsyncExitStack()

    # Life cycle ----------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def call(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` on the servers' loop (their state belongs to it)."""

        async def run() -> Any:
            return function()

        return self._run(run())

    def start(self) -> FakeInternet:
        self.dns.start()
        self._thread.start()

        async def up() -> None:
            self.rdap = await self._stack.enter_async_context(rdap_server(REGISTRIES))
            self.reputation = await self._stack.enter_async_context(ReputationServer())
            await self._stack.enter_async_context(self.feeds)

        self._run(up())
        self.restore()
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(self._stack.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()  # its self-pipe sockets, else left to the garbage collector (a ResourceWarning)
        self.dns.stop()

    def __enter__(self) -> FakeInternet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Where the service finds it -------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """The ``IPINTEL_*`` variables pointing a server process here."""
        assert self.rdap is not None and self.reputation is not None
        feed_urls = ",".join(f"{name}={url}" for name, url in self.feeds.feed_urls().items() if url)
        return {
            "IPINTEL_DNS_SERVERS": self.dns.env,
            "IPINTEL_DNS_TIMEOUT": "0.5",
            "IPINTEL_DNSBL_ZONES": "healthy.test,second.test",
            "IPINTEL_RDAP_BOOTSTRAP_URL": self.rdap.bootstrap_url,
            "IPINTEL_REPUTATION_URL": self.reputation.url("/api"),
            "IPINTEL_UPSTREAM_TIMEOUT": "1",
            "IPINTEL_CYMRU_ZONE": "asn.cymru.test",
            "IPINTEL_FEEDS": "on",
            "IPINTEL_FEED_URLS": feed_urls,
            "IPINTEL_BLACKLIST_DEADLINE": "1.5",
        }

    def settings(self, base: Settings | None = None) -> Settings:
        """``base`` (default: the settings the environment of :attr:`env` gives) with every
        upstream pointed here, for ASGI tests."""
        env = self.env
        if base is None:
            # The in-process client's name (tests/support/app.py) besides the loopback names of a loopback bind.
            return Settings.from_env(env).replace(allowed_hosts=("ipintel.test", "localhost", "127.0.0.1", "::1"))
        return base.replace(
            dns_servers=self.dns.servers,
            dns_timeout=float(env["IPINTEL_DNS_TIMEOUT"]),
            dnsbl_zones=tuple(env["IPINTEL_DNSBL_ZONES"].split(",")),
            rdap_bootstrap_url=env["IPINTEL_RDAP_BOOTSTRAP_URL"],
            reputation_url=env["IPINTEL_REPUTATION_URL"],
            upstream_timeout=float(env["IPINTEL_UPSTREAM_TIMEOUT"]),
            cymru_zone=env["IPINTEL_CYMRU_ZONE"],
            feed_urls=parse_feed_urls(env["IPINTEL_FEED_URLS"]),
            blacklist_deadline=float(env["IPINTEL_BLACKLIST_DEADLINE"]),
        )

    # Faults on command ------------------------------------------------------------

    def restore(self) -> None:
        """Every upstream healthy, with its normal content."""
        dns = self.dns
        dns.clear()
        dns.delay = 0.0
        dns.add(DOMAIN, "A", "93.184.215.14", ttl=60)
        dns.add(DOMAIN, "AAAA", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", ttl=60)
        dns.add(DOMAIN, "MX", "10 mail.example.com", ttl=60)
        dns.add(DOMAIN, "TXT", ["v=spf1 -all"], ttl=60)
        dns.add(DOMAIN, "NS", "a.iana-servers.net", ttl=60)
        dns.add("www.example.com", "CNAME", DOMAIN, ttl=60)
        dns.add("xn--bcher-kva.example", "A", "192.0.2.80", ttl=60)
        dns.add_ptr("8.8.8.8", "dns.google", ttl=60)
        dns.add_ptr("2001:4860:4860::8888", "dns.google", ttl=60)
        for ip, asn, prefix in (("8.8.8.8", 15169, "8.8.8.0/24"), (ARIN_IP, 16509, "3.0.0.0/9")):
            reversed_ip = ".".join(reversed(ip.split(".")))
            dns.add(f"{reversed_ip}.origin.asn.cymru.test", "TXT", [f"{asn} | {prefix} | US | arin | 2023-12-28"])
        dns.add("AS15169.asn.cymru.test", "TXT", ["15169 | US | arin | 2000-03-30 | GOOGLE - Google LLC, US"])
        dns.add("AS16509.asn.cymru.test", "TXT", ["16509 | US | arin | 2000-05-04 | AMAZON-02 - Amazon.com, Inc., US"])
        healthy_list(dns, "healthy.test", listed={LISTED_IP: "127.0.0.2"})
        healthy_list(dns, "second.test")

        def web_side() -> None:
            assert self.rdap is not None and self.reputation is not None
            self.rdap.replies.clear()
            self.rdap.default = None
            self.rdap.serve_registries(REGISTRIES)
            self.rdap.set(self.rdap.ip_path("arin", ARIN_IP), Reply.json(ARIN_NETWORK))
            self.rdap.set(self.rdap.ip_path("ripe", RIPE_IP), Reply.json(RIPE_NETWORK))
            self.rdap.set(self.rdap.autnum_path("arin", 15169), Reply.json(ARIN_AUTNUM))
            self.rdap.set(self.rdap.autnum_path("ripe", 3333), Reply.json(RIPE_AUTNUM))
            self.reputation.respond(body=SFS_CLEAN)
            self.feeds.replies.clear()
            self.feeds.serve_world()

        self.call(web_side)

    def apply(self, *faults: str) -> None:
        """Apply faults by name (see :data:`FAULTS`), on top of the current state."""
        for name in faults:
            FAULTS[name](self)

    # DNS: forward, reverse, DNSBL and Cymru zones alike.

    def dns_down(self) -> None:
        """No DNS query is answered: every lookup ends in its timeout."""
        self.dns.clear()
        for top in ("com", "net", "org", "test", "example", "arpa", "google"):
            self.dns.blackhole(top)

    def dns_slow(self, delay: float = 0.15) -> None:
        """Every DNS answer ``delay`` seconds late. The default is answered, late; from about
        0.25 s (the resolver's first try of its 0.5 s timeout here) the queries time out."""
        self.dns.delay = delay

    def dns_garbage(self) -> None:
        """DNS answers that are wrong rather than missing: the forward and reverse zones
        SERVFAIL, the DNSBL zones answer outside 127/8 (a resolver rewriting NXDOMAIN to an
        advertising server), the Cymru zone answers TXT that is not Cymru's format."""
        self.dns.clear()

        def garbage(name: str, qtype: str) -> Answer | None:
            if name.endswith((".healthy.test", ".second.test")) and qtype == "A":
                return Answer.a(name, AD_SERVER, ttl=0)
            if name.endswith(".asn.cymru.test"):
                return Answer.of(name, "TXT", ["<html>not cymru</html>"], ttl=0)
            return Answer("SERVFAIL")

        self.dns.hook(garbage)

    # RDAP: the bootstrap stays reachable (it is cached by the service anyway); the registries fail.

    def _rdap_networks(self, reply: Callable[[dict[str, Any] | None], Reply]) -> None:
        """The known networks, and every other address (which would be a 404), answer ``reply``."""

        def apply() -> None:
            assert self.rdap is not None
            self.rdap.set(self.rdap.ip_path("arin", ARIN_IP), reply(ARIN_NETWORK))
            self.rdap.set(self.rdap.ip_path("ripe", RIPE_IP), reply(RIPE_NETWORK))
            self.rdap.set(self.rdap.autnum_path("arin", 15169), reply(ARIN_AUTNUM))
            self.rdap.set(self.rdap.autnum_path("ripe", 3333), reply(RIPE_AUTNUM))
            self.rdap.default = reply(None)

        self.call(apply)

    def rdap_failing(self, status: int = 503) -> None:
        """Every registry answers ``status`` (an RDAP error object)."""
        self._rdap_networks(lambda _document: Reply.server_error(status))

    def rdap_down(self) -> None:
        """The registries close the connection without answering."""
        self._rdap_networks(lambda _document: Reply.dropped())

    def rdap_slow(self, delay: float = 3.0) -> None:
        """The registries answer ``delay`` seconds late (above ``IPINTEL_UPSTREAM_TIMEOUT``: timeouts)."""
        self._rdap_networks(lambda document: Reply.slow(delay, document))

    def rdap_garbage(self) -> None:
        """ARIN answers truncated JSON, RIPE its HTML rate-limit page, other addresses truncated JSON."""

        def garbage() -> None:
            assert self.rdap is not None
            self.rdap.set(self.rdap.ip_path("arin", ARIN_IP), Reply.invalid_json())
            self.rdap.set(self.rdap.ip_path("ripe", RIPE_IP), Reply.html_429())
            self.rdap.default = Reply.invalid_json()

        self.call(garbage)

    # The reputation API.

    def reputation_down(self) -> None:
        def down() -> None:
            assert self.reputation is not None
            self.reputation.respond(status=503, body="service unavailable")

        self.call(down)

    def reputation_garbage(self) -> None:
        def garbage() -> None:
            assert self.reputation is not None
            self.reputation.respond(status=200, body="<html>maintenance</html>")

        self.call(garbage)

    def reputation_slow(self, delay: float = 4.0) -> None:
        def slow() -> None:
            assert self.reputation is not None
            self.reputation.respond(body=SFS_CLEAN, delay=delay)

        self.call(slow)

    # The feeds (fetched at start-up, then on their schedule; after a failure, retried in 1, 2, 4 ... min).

    def _feeds(self, reply: Callable[[FeedReply], FeedReply]) -> None:
        def apply() -> None:
            for path, current in list(self.feeds.replies.items()):
                self.feeds.set(path, reply(current))

        self.call(apply)

    def feeds_down(self) -> None:
        self._feeds(lambda _current: FeedReply(b"unavailable", status=503))

    def feeds_slow(self, delay: float = 5.0) -> None:
        self._feeds(lambda current: dataclasses.replace(current, delay=delay))

    def feeds_garbage(self) -> None:
        """Every feed answers 200 with an HTML page instead of its format."""
        self._feeds(lambda _current: FeedReply(b"<html><body>Please enable JavaScript</body></html>" * 50))


# Every fault by name, for the soak run, the fuzzing and the tests: ``net.apply("dns_down", "rdap_slow")``.
FAULTS: dict[str, Callable[[FakeInternet], None]] = {
    "dns_down": FakeInternet.dns_down,
    "dns_slow": FakeInternet.dns_slow,
    "dns_garbage": FakeInternet.dns_garbage,
    "rdap_failing": FakeInternet.rdap_failing,
    "rdap_down": FakeInternet.rdap_down,
    "rdap_slow": FakeInternet.rdap_slow,
    "rdap_garbage": FakeInternet.rdap_garbage,
    "reputation_down": FakeInternet.reputation_down,
    "reputation_slow": FakeInternet.reputation_slow,
    "reputation_garbage": FakeInternet.reputation_garbage,
    "feeds_down": FakeInternet.feeds_down,
    "feeds_slow": FakeInternet.feeds_slow,
    "feeds_garbage": FakeInternet.feeds_garbage,
}
