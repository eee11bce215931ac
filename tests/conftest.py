"""Fixtures shared by the test modules: the fixture databases, the offline settings, and the local
stand-ins for the far side of every network boundary (tests/support/), each started per test.

A module that needs a server with content of its own overrides the fixture by name and fills the
server it is given (``def dns(dns): dns.add(...); return dns``)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from ipintel.infra.resolver import Resolver
from ipintel.infra.upstream import HttpClient
from ipintel.settings import Settings
from tests.support import kinds
from tests.support.dns_server import DnsServer
from tests.support.fake_internet import FakeInternet
from tests.support.feeds import FeedServer
from tests.support.mmdb import write_asn_db, write_city_db
from tests.support.rdap_server import REGISTRIES, RdapServer, rdap_server
from tests.support.reputation_server import ReputationServer

# The kinds of test (tests/support/kinds.py) ---------------------------------------------------------------


# `make test-fast` loads Hypothesis's "fast" profile (--hypothesis-profile=fast): every property test tries at most
# FAST_EXAMPLES examples, those that ask for more included; `make test` tries every example each asks for.
FAST_EXAMPLES = 10
hypothesis.settings.register_profile("fast", max_examples=FAST_EXAMPLES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its kinds; a test of no other kind is ``unit``. Under the fast profile, cap examples."""
    fast = hypothesis.settings.get_current_profile_name() == "fast"
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        chosen = getattr(item.obj, "_hypothesis_internal_use_settings", None)  # what @settings gave the test
        if fast and chosen is not None and chosen.max_examples > FAST_EXAMPLES:
            item.obj._hypothesis_internal_use_settings = hypothesis.settings(chosen, max_examples=FAST_EXAMPLES)
        fixtures = [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
        found = kinds.kinds_of([item.function, *fixtures]) | {
            m.name for m in item.iter_markers() if m.name in kinds.KINDS
        }
        for kind in sorted(found - {m.name for m in item.iter_markers()}):
            item.add_marker(kind)
        if not found:
            item.add_marker("unit")


_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _checked_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
    kinds.check_spawn(args)
    _execute_child(self, args, *rest)


subprocess.Popen._execute_child = _checked_execute_child  # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    kinds.current = item
    try:
        return (yield)
    finally:
        kinds.current = None


@pytest.fixture(scope="session")
def city_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_city_db(tmp_path_factory.mktemp("mmdb") / "city.mmdb")


@pytest.fixture(scope="session")
def asn_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_asn_db(tmp_path_factory.mktemp("mmdb") / "asn.mmdb")


@pytest.fixture
def settings(tmp_path: Path, city_db: Path, asn_db: Path) -> Settings:
    """Settings for a test: fixture databases, no network anywhere, no rate limits.

    Every upstream points at a closed local port unless a test gives it a
    local server, so nothing can leave the machine."""
    return Settings(
        data_dir=tmp_path / "data",
        geoip_city_db=city_db,
        geoip_asn_db=asn_db,
        dns_servers=(("127.0.0.1", 9),),
        dns_timeout=0.5,
        reputation_url="http://127.0.0.1:9/api",
        rdap_bootstrap_url="http://127.0.0.1:9/rdap/",
        upstream_timeout=1.0,
        feeds_enabled=False,
        rate_limits=None,
        log_format="text",
        # The in-process client's base URL (tests/support/app.py); tests/test_hosts.py checks the default.
        allowed_hosts=("ipintel.test", "localhost", "127.0.0.1", "::1"),
    )


# DNS ------------------------------------------------------------------------------------------------


@pytest.fixture
def dns() -> Iterator[DnsServer]:
    """An empty DNS server on 127.0.0.1 (tests/support/dns_server.py): every name NXDOMAIN until added."""
    with DnsServer() as server:
        yield server


@pytest.fixture
def dns_settings(settings: Settings, dns: DnsServer) -> Settings:
    """:func:`settings` asking :func:`dns` for every name."""
    return settings.replace(dns_servers=dns.servers)


@pytest.fixture
async def resolver(dns: DnsServer) -> AsyncIterator[Resolver]:
    """The service's resolver, asking :func:`dns`."""
    async with Resolver(dns.servers, timeout=0.5) as r:
        yield r


# HTTP upstreams -------------------------------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    """The service's pooled HTTP client (1 s unless a call says otherwise)."""
    client = HttpClient(timeout=1.0)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def rdap() -> AsyncIterator[RdapServer]:
    """The RDAP world (tests/support/rdap_server.py): a bootstrap for the five registries of
    ``REGISTRIES``, each answering an RDAP 404 for every address until a test sets its answer."""
    async with rdap_server(REGISTRIES) as server:
        yield server


@pytest.fixture
def whois_settings(settings: Settings, rdap: RdapServer) -> Settings:
    """:func:`settings` with the RDAP bootstrap of :func:`rdap`."""
    return settings.replace(rdap_bootstrap_url=rdap.bootstrap_url)


@pytest.fixture
async def api() -> AsyncIterator[ReputationServer]:
    """The reputation API (StopForumSpam, AbuseIPDB) on 127.0.0.1; it answers "never reported" until told."""
    async with ReputationServer() as server:
        yield server


@pytest.fixture
async def feed_server() -> AsyncIterator[FeedServer]:
    """Every VPN/hosting feed in its published format (tests/support/feeds.py), serving the feed world."""
    async with FeedServer() as server:
        server.serve_world()
        yield server


# The whole fake internet ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def net() -> Iterator[FakeInternet]:
    """Every upstream at once (tests/support/fake_internet.py), one per test module: it takes a while
    to start. A module that switches faults on marks itself ``usefixtures("healthy_net")``."""
    with FakeInternet() as internet:
        yield internet


@pytest.fixture
def healthy_net(net: FakeInternet) -> Iterator[FakeInternet]:
    """:func:`net` with every upstream healthy, before the test and after it."""
    net.restore()
    yield net
    net.restore()
