"""The IANA RDAP bootstrap registry (RFC 9224): which RDAP server answers for an address.

IANA publishes ``ipv4.json`` and ``ipv6.json``; each lists prefixes and the
base URLs of the RDAP service responsible for them. The files change a few
times a year, so they are fetched when first needed, kept in memory and
refreshed once a day - never per request (docs/API.md#registry-rdap):

- concurrent first uses share one fetch (single flight), so a burst of
  lookups after start does not hit IANA once per request;
- a failed refresh keeps the last good copy and is retried after a pause,
  so an IANA outage never breaks lookups that worked before it;
- with no good copy at all, the fetch failure is the lookup's failure
  (``upstream_error`` / ``upstream_timeout``), retried on the next lookup.

Matching is longest-prefix: a more specific entry wins over a covering one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

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


def parse_bootstrap(document: Any, version: int) -> BootstrapTable:
    """Build a table from a parsed ``ipv4.json``/``ipv6.json``.

    Malformed entries are skipped one by one (a single bad prefix must not
    discard the registry); a file with no usable entry at all is an error."""
    if not isinstance(document, dict) or not isinstance(document.get("services"), list):
        raise UpstreamError(f"the RDAP bootstrap ipv{version}.json has no 'services' list")
    by_length: dict[int, dict[int, str]] = {}
    for service in document["services"]:
        if not isinstance(service, list) or len(service) < 2:
            continue
        prefixes, urls = service[0], service[1]
        if not isinstance(prefixes, list) or not isinstance(urls, list):
            continue
        url = choose_base_url(urls)
        if url is None:
            continue
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


@dataclass
class _FamilyState:
    table: BootstrapTable | None = None
    next_refresh: float = 0.0
    pending: asyncio.Task[BootstrapTable] | None = field(default=None, repr=False)


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
        self._families = {4: _FamilyState(), 6: _FamilyState()}

    async def base_url_for(self, address: IPAddress) -> str | None:
        """The RDAP base URL responsible for ``address``, or ``None`` when IANA lists none."""
        table = await self.table(address.version)
        return table.base_url(address)

    async def table(self, version: int) -> BootstrapTable:
        state = self._families[version]
        if state.table is not None and self.clock() < state.next_refresh:
            return state.table
        if state.pending is None:
            state.pending = asyncio.create_task(self._refresh(version, state))
            state.pending.add_done_callback(_retrieve)
        # shield: a client that disconnects must not cancel the fetch others wait for.
        return await asyncio.shield(state.pending)

    async def _refresh(self, version: int, state: _FamilyState) -> BootstrapTable:
        try:
            table = await self._fetch(version)
        except (UpstreamError, UpstreamTimeout) as error:
            if state.table is None:
                raise
            log.warning("RDAP bootstrap ipv%d.json refresh failed, keeping the last good copy: %s", version, error)
            state.next_refresh = self.clock() + self.retry_after
            return state.table
        else:
            state.table = table
            state.next_refresh = self.clock() + self.refresh_after
            log.info("RDAP bootstrap ipv%d.json loaded: %d prefixes", version, len(table))
            return table
        finally:
            state.pending = None

    async def _fetch(self, version: int) -> BootstrapTable:
        url = f"{self.base_url}ipv{version}.json"
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
            document = json.loads(response.body)
        except (ValueError, RecursionError):
            raise UpstreamError(f"the RDAP bootstrap {url} is not valid JSON") from None
        return parse_bootstrap(document, version)


def _retrieve(task: asyncio.Task[BootstrapTable]) -> None:
    """Mark a failed fetch's exception as seen when every waiter went away."""
    if not task.cancelled():
        task.exception()
