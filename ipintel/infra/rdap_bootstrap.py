"""The IANA RDAP bootstrap registry (RFC 9224): which RDAP server answers for an address (``ipv4.json``,
``ipv6.json``: prefixes, longest match wins) or an AS number (``asn.json``: ranges). The files change a few times
a year, so they are fetched when first needed, kept in memory and refreshed once a day, never per request
(docs/API.md#registry-rdap).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import ipaddress
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ipintel.addresses import IPAddress
from ipintel.errors import UpstreamError, UpstreamTimeout
from ipintel.infra.upstream import HttpClient

log = logging.getLogger("ipintel.rdap")

DAY = 24 * 3600.0
# After a failed refresh (with a good copy in hand), wait this long before trying again.
RETRY_AFTER_FAILURE = 600.0
# The published files are a few kilobytes; anything near this is not a bootstrap file.
MAX_BOOTSTRAP_BYTES = 1024 * 1024

_BITS = {4: 32, 6: 128}


@dataclass(frozen=True)
class BootstrapTable:
    """One family's services: ``{prefix length: {network as int: base URL}}``.

    Lookup tries the lengths present, longest first, so its cost is the number
    of distinct prefix lengths (a handful), not the number of entries."""

    version: int
    by_length: dict[int, dict[int, str]]
    lengths: tuple[int, ...]  # longest first

    def base_url(self, address: IPAddress) -> str | None:
        value = int(address)
        bits = _BITS[self.version]
        for length in self.lengths:
            mask = ((1 << length) - 1) << (bits - length) if length else 0
            url = self.by_length[length].get(value & mask)
            if url is not None:
                return url
        return None

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.by_length.values())


def choose_base_url(urls: Iterable[object]) -> str | None:
    """The service URL to use: the first HTTPS one, else the first HTTP one.

    RFC 9224 lists equivalent URLs for one service; HTTPS is preferred, but a
    list with only HTTP URLs (a local mirror, a test server) is still usable.
    A missing trailing ``/`` is added, as RFC 9224 3 asks clients to do."""
    http_url = None
    for url in urls:
        if not isinstance(url, str):
            continue
        lowered = url.strip().lower()
        if lowered.startswith("https://"):
            return _with_slash(url.strip())
        if lowered.startswith("http://") and http_url is None:
            http_url = _with_slash(url.strip())
    return http_url


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _services(document: Any, file: str) -> Iterator[tuple[list[Any], str]]:
    """Each service of a bootstrap file (RFC 9224 section 3) as (its entries, its base URL); a malformed
    service is skipped, a file without a ``services`` list is an error."""
    if not isinstance(document, dict) or not isinstance(document.get("services"), list):
        raise UpstreamError(f"the RDAP bootstrap {file} has no 'services' list")
    for service in document["services"]:
        if not isinstance(service, list) or len(service) < 2:
            continue
        entries, urls = service[0], service[1]
        if not isinstance(entries, list) or not isinstance(urls, list):
            continue
        url = choose_base_url(urls)
        if url is not None:
            yield entries, url


def parse_bootstrap(document: Any, version: int) -> BootstrapTable:
    """Build a table from a parsed ``ipv4.json``/``ipv6.json``.

    Malformed entries are skipped one by one (a single bad prefix must not
    discard the registry); a file with no usable entry at all is an error."""
    by_length: dict[int, dict[int, str]] = {}
    for prefixes, url in _services(document, f"ipv{version}.json"):
        for prefix in prefixes:
            if not isinstance(prefix, str):
                continue
            try:
                network = ipaddress.ip_network(prefix.strip(), strict=False)
            except ValueError:
                continue
            if network.version != version:
                continue
            by_length.setdefault(network.prefixlen, {})[int(network.network_address)] = url
    if not by_length:
        raise UpstreamError(f"the RDAP bootstrap ipv{version}.json lists no usable service")
    return BootstrapTable(version, by_length, tuple(sorted(by_length, reverse=True)))


@dataclass(frozen=True)
class AsnBootstrapTable:
    """``asn.json``: sorted, non-overlapping ranges of AS numbers, each with its base URL; bisect finds one."""

    starts: tuple[int, ...]
    ranges: tuple[tuple[int, int, str], ...]  # (first, last, base URL), by first

    def base_url(self, number: int) -> str | None:
        index = bisect.bisect_right(self.starts, number) - 1
        if index < 0:
            return None
        first, last, url = self.ranges[index]
        return url if first <= number <= last else None

    def __len__(self) -> int:
        return len(self.ranges)


_MAX_ASN = 2**32 - 1


def _asn_range(text: object) -> tuple[int, int] | None:
    """``"1-1876"`` or ``"3333"`` (RFC 9224 5.3) as ``(first, last)``; ``None`` when unreadable."""
    if not isinstance(text, str):
        return None
    first_text, _, last_text = text.strip().partition("-")
    if not first_text.isascii() or not first_text.isdigit() or len(first_text) > 10:
        return None
    last_text = last_text or first_text
    if not last_text.isascii() or not last_text.isdigit() or len(last_text) > 10:
        return None
    first, last = int(first_text), int(last_text)
    if first > last or last > _MAX_ASN:
        return None
    return first, last


def parse_asn_bootstrap(document: Any) -> AsnBootstrapTable:
    """Build a table from a parsed ``asn.json``; malformed entries are skipped one by one, as for addresses,
    and so is a range that overlaps one with a lower start (IANA's ranges never overlap)."""
    entries: list[tuple[int, int, str]] = []
    for ranges, url in _services(document, "asn.json"):
        for text in ranges:
            span = _asn_range(text)
            if span is not None:
                entries.append((span[0], span[1], url))
    if not entries:
        raise UpstreamError("the RDAP bootstrap asn.json lists no usable service")
    kept: list[tuple[int, int, str]] = []
    for first, last, url in sorted(entries):
        if kept and first <= kept[-1][1]:
            continue  # overlaps a range read before it: IANA's never do, so one of them is wrong
        kept.append((first, last, url))
    return AsnBootstrapTable(tuple(first for first, _, _ in kept), tuple(kept))


def _parse_family(document: Any, *, version: int) -> BootstrapTable:
    return parse_bootstrap(document, version)


_Table = TypeVar("_Table", BootstrapTable, AsnBootstrapTable)


@dataclass
class _FileState(Generic[_Table]):
    """One bootstrap file (``ipv4.json``, ``ipv6.json``, ``asn.json``): its table, refresh time and fetch."""

    name: str
    parse: Callable[[Any], _Table] = field(repr=False)
    table: _Table | None = None
    next_refresh: float = 0.0
    pending: asyncio.Task[_Table] | None = field(default=None, repr=False)


class RdapBootstrap:
    """The bootstrap files of one base URL, fetched lazily and refreshed daily.

    ``clock`` is injectable so that the refresh schedule can be tested without
    waiting a day."""

    def __init__(
        self,
        base_url: str,
        http: HttpClient,
        *,
        refresh_after: float = DAY,
        retry_after: float = RETRY_AFTER_FAILURE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = _with_slash(base_url)
        self.http = http
        self.refresh_after = refresh_after
        self.retry_after = retry_after
        self.clock = clock
        self._families: dict[int, _FileState[BootstrapTable]] = {
            version: _FileState(f"ipv{version}.json", functools.partial(_parse_family, version=version))
            for version in (4, 6)
        }
        self._asn: _FileState[AsnBootstrapTable] = _FileState("asn.json", parse_asn_bootstrap)

    async def base_url_for(self, address: IPAddress) -> str | None:
        """The RDAP base URL responsible for ``address``, or ``None`` when IANA lists none."""
        table = await self.table(address.version)
        return table.base_url(address)

    async def base_url_for_asn(self, number: int) -> str | None:
        """The RDAP base URL responsible for AS ``number`` (``asn.json``), or ``None`` when IANA lists none."""
        table = await self.asn_table()
        return table.base_url(number)

    async def table(self, version: int) -> BootstrapTable:
        return await self._current(self._families[version])

    async def asn_table(self) -> AsnBootstrapTable:
        return await self._current(self._asn)

    async def _current(self, state: _FileState[_Table]) -> _Table:
        if state.table is not None and self.clock() < state.next_refresh:
            return state.table
        if state.pending is None:
            state.pending = asyncio.create_task(self._refresh(state))
            state.pending.add_done_callback(_retrieve)
        # Concurrent first uses share one fetch (single flight): a burst of lookups after start asks IANA once.
        # shield: a client that disconnects must not cancel the fetch others wait for.
        return await asyncio.shield(state.pending)

    async def _refresh(self, state: _FileState[_Table]) -> _Table:
        try:
            table = state.parse(await self._fetch(state.name))
        except (UpstreamError, UpstreamTimeout) as error:
            if state.table is None:  # no good copy at all: the lookup fails, and the next one tries again
                raise
            # An IANA outage never breaks lookups that worked before it: the last good copy, retried after a pause.
            log.warning("RDAP bootstrap %s refresh failed, keeping the last good copy: %s", state.name, error)
            state.next_refresh = self.clock() + self.retry_after
            return state.table
        else:
            state.table = table
            state.next_refresh = self.clock() + self.refresh_after
            log.info("RDAP bootstrap %s loaded: %d entries", state.name, len(table))
            return table
        finally:
            state.pending = None

    async def _fetch(self, name: str) -> Any:
        url = f"{self.base_url}{name}"
        response = await self.http.get(
            url,
            headers={"Accept": "application/json"},
            max_bytes=MAX_BOOTSTRAP_BYTES,
            what=f"the RDAP bootstrap {url}",
            source="rdap-bootstrap",
        )
        if response.status != 200:
            raise UpstreamError(f"the RDAP bootstrap {url} answered HTTP {response.status}")
        try:
            return json.loads(response.body)
        except (ValueError, RecursionError):
            raise UpstreamError(f"the RDAP bootstrap {url} is not valid JSON") from None


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a failed fetch's exception as seen when every waiter went away."""
    if not task.cancelled():
        task.exception()
