"""The one DNS resolver of the service: aiodns (c-ares) with a hard deadline per query. Every DNS query the
service makes (``/dns``, reverse lookups, Team Cymru, DNSBLs, VPN heuristics) goes through :class:`Resolver`, so
that timeouts, server selection and upstream statistics are decided once. Servers come from
``IPINTEL_DNS_SERVERS``, else the system configuration (``/etc/resolv.conf``); answers are :class:`DnsRecord`
with their TTLs (never pycares types), failures our exception types (never ``aiodns.error.DNSError``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiodns
import aiodns.error
import pycares

from ipintel.infra.stats import UpstreamStats

# Record types a caller may ask for (aiodns's names).
QUERY_TYPES = frozenset({"A", "AAAA", "CAA", "CNAME", "MX", "NAPTR", "NS", "PTR", "SOA", "SRV", "TXT"})

# pycares record type numbers -> names, for the records we turn into text.
_TYPE_NAMES: dict[int, str] = {
    pycares.QUERY_TYPE_A: "A",
    pycares.QUERY_TYPE_AAAA: "AAAA",
    pycares.QUERY_TYPE_CNAME: "CNAME",
    pycares.QUERY_TYPE_MX: "MX",
    pycares.QUERY_TYPE_NS: "NS",
    pycares.QUERY_TYPE_PTR: "PTR",
    pycares.QUERY_TYPE_TXT: "TXT",
    pycares.QUERY_TYPE_SOA: "SOA",
    pycares.QUERY_TYPE_SRV: "SRV",
    pycares.QUERY_TYPE_CAA: "CAA",
}

# c-ares's retry schedule: _TRIES tries, each twice the previous one, the first timeout / 7, fitting one deadline.
# c-ares cannot cancel one query (ares_cancel cancels them all), so its tries must end together with our
# deadline: a lost UDP packet is re-sent twice before the caller gives up, and c-ares does not retry past it.
_TRIES = 3
_FIRST_TRY_SHARE = 1 / (2**_TRIES - 1)
_MIN_TRY_SECONDS = 0.25  # c-ares's own floor: it adapts the per-try timeout to the latency it measures, not below
# A query that c-ares abandons with less than this left of our deadline is not re-sent.
_MIN_RETRY_SECONDS = 0.05
# At most this many sends of one query: never a busy loop, whatever c-ares reports.
_MAX_SENDS = 4


@dataclass(frozen=True)
class DnsRecord:
    """One answer record in text form.

    ``data``: the address for A/AAAA; ``"<preference> <exchange>"`` for MX;
    the record's character strings joined for TXT; the host name without the
    trailing dot for PTR, CNAME and NS."""

    name: str
    type: str
    ttl: int
    data: str


class ResolverError(Exception):
    """Any failure to get an answer; the subclasses say which."""


class NxDomain(ResolverError):
    """The name does not exist (NXDOMAIN)."""


class ServerFailure(ResolverError):
    """The server answered with an error, or could not be used.

    ``rcode`` names it: ``SERVFAIL``, ``REFUSED``, ``FORMERR``, ``NOTIMP``,
    ``CONNREFUSED`` (nothing listens there), ``BADRESP`` (an answer we
    cannot parse)."""

    def __init__(self, rcode: str, message: str) -> None:
        super().__init__(message)
        self.rcode = rcode


class QueryTimeout(ResolverError):
    """No answer within the timeout."""


# c-ares statuses that mean "the server could not give an answer" -> ServerFailure.rcode
_SERVER_FAILURES: dict[int, str] = {
    aiodns.error.ARES_ESERVFAIL: "SERVFAIL",
    aiodns.error.ARES_EREFUSED: "REFUSED",
    aiodns.error.ARES_EFORMERR: "FORMERR",
    aiodns.error.ARES_ENOTIMP: "NOTIMP",
    aiodns.error.ARES_ECONNREFUSED: "CONNREFUSED",
    aiodns.error.ARES_EBADRESP: "BADRESP",
    aiodns.error.ARES_EOF: "BADRESP",
}


def server_address(host: str, port: int) -> str:
    """The form c-ares accepts for a server: ``ip:port``, ``[ipv6]:port``."""
    ip = ipaddress.ip_address(host)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


class Resolver:
    """The shared aiodns resolver; create once, :meth:`start` inside the event loop."""

    def __init__(
        self,
        servers: tuple[tuple[str, int], ...] = (),
        timeout: float = 2.0,
        stats: UpstreamStats | None = None,
        *,
        rotate_after_queries: int = 20_000,
        rotate_after_seconds: float = 600.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.servers = tuple(servers)
        self.timeout = timeout
        self.stats = stats or UpstreamStats()
        self._dns: aiodns.DNSResolver | None = None
        # c-ares keeps an answer cache per channel that cannot be switched off
        # from pycares and has no entry limit (only a TTL cap of one hour). A
        # fresh channel every N queries or T seconds bounds it: client-chosen
        # names cannot pile up in it.
        self.rotate_after_queries = rotate_after_queries
        self.rotate_after_seconds = rotate_after_seconds
        self.rotations = 0
        self._queries = 0
        self._born = 0.0
        self._retired: set[asyncio.Task[None]] = set()

    def _new_channel(self) -> aiodns.DNSResolver:
        nameservers = [server_address(host, port) for host, port in self.servers] or None
        first_try = max(self.timeout * _FIRST_TRY_SHARE, _MIN_TRY_SECONDS)
        self._queries = 0
        self._born = time.monotonic()
        return aiodns.DNSResolver(nameservers=nameservers, timeout=first_try, tries=_TRIES)

    async def start(self) -> None:
        """Create the c-ares channel; it needs the running loop, hence not in ``__init__``."""
        if self._dns is None:
            self._dns = self._new_channel()

    async def close(self) -> None:
        for task in list(self._retired):
            task.cancel()
        if self._dns is not None:
            dns, self._dns = self._dns, None
            await dns.close()

    def _rotate(self) -> None:
        """Replace the channel; the old one finishes its queries in flight
        (each ends within its timeout) and is closed after that."""
        old, self._dns = self._dns, self._new_channel()
        self.rotations += 1

        async def retire() -> None:
            try:
                await asyncio.sleep(self.timeout + 1.0)
            finally:
                if old is not None:
                    await old.close()

        task = asyncio.get_running_loop().create_task(retire())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def __aenter__(self) -> Resolver:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def nameservers(self) -> list[str]:
        """The servers c-ares actually uses (``ip:port``), for logs and /readyz."""
        return list(self._channel()._channel.servers)

    def _channel(self) -> aiodns.DNSResolver:
        if self._dns is None:
            raise RuntimeError("Resolver.start() was not awaited")
        return self._dns

    async def query(
        self, name: str, rdtype: str, *, timeout: float | None = None, source: str = "dns"
    ) -> list[DnsRecord]:
        """The answer records for ``name``/``rdtype``; ``[]`` means the name exists
        without records of that type (NODATA).

        A CNAME met on the way is in the answer as its own record, before the
        records of its target. Raises :class:`NxDomain`, :class:`ServerFailure`,
        :class:`QueryTimeout` or :class:`ResolverError`. ``source`` names the
        caller in the upstream statistics (e.g. ``"dnsbl"``)."""
        rdtype = rdtype.upper()
        if rdtype not in QUERY_TYPES:
            raise ValueError(f"unsupported record type {rdtype!r}")
        limit = self.timeout if timeout is None else timeout
        self._channel()  # raises before start()
        self._queries += 1
        if self._queries > self.rotate_after_queries or time.monotonic() - self._born > self.rotate_after_seconds:
            self._rotate()
        dns = self._channel()
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await self._query_until(dns, name, rdtype, limit, started)
            records = [r for r in (_to_record(rr) for rr in result.answer) if r is not None]
            outcome = "ok"
            return records
        except NxDomain:
            outcome = "nxdomain"
            raise
        except QueryTimeout:
            outcome = "timeout"
            raise
        except ServerFailure as exc:
            outcome = {"SERVFAIL": "servfail", "REFUSED": "refused"}.get(exc.rcode, "error")
            raise
        finally:
            self.stats.record(source, outcome, time.perf_counter() - started)

    async def _query_until(self, dns: aiodns.DNSResolver, name: str, rdtype: str, limit: float, started: float) -> Any:
        """Send the query, re-sending when c-ares gives up before our deadline (its tries, shortened to the
        latency it measured, may all end early)."""
        deadline = started + limit
        try:
            async with asyncio.timeout(limit):  # past it the caller gets QueryTimeout at once; a late answer is dropped
                for sends in range(1, _MAX_SENDS + 1):
                    try:
                        return await dns.query_dns(name, rdtype)
                    except aiodns.error.DNSError as exc:
                        errno = exc.args[0] if exc.args else None
                        if errno == aiodns.error.ARES_ENODATA:
                            return pycares.DNSResult(answer=[], authority=[], additional=[])
                        time_left = deadline - time.perf_counter()
                        if (
                            errno == aiodns.error.ARES_ETIMEOUT
                            and sends < _MAX_SENDS
                            and time_left > _MIN_RETRY_SECONDS
                        ):
                            continue
                        raise _translate(exc, name, rdtype, limit) from None
                raise AssertionError("unreachable: the last send returns or raises")
        except TimeoutError:
            raise QueryTimeout(f"no answer for {name} {rdtype} within {limit:g} s") from None


def _translate(exc: aiodns.error.DNSError, name: str, rdtype: str, limit: float) -> ResolverError:
    errno = exc.args[0] if exc.args else None
    if errno in (aiodns.error.ARES_ENOTFOUND, aiodns.error.ARES_ENONAME):
        return NxDomain(f"{name} does not exist")
    if errno == aiodns.error.ARES_ETIMEOUT:
        return QueryTimeout(f"no answer for {name} {rdtype} within {limit:g} s")
    if errno in _SERVER_FAILURES:
        rcode = _SERVER_FAILURES[errno]
        if rcode == "CONNREFUSED":
            return ServerFailure(rcode, f"the DNS server refused the connection for {name} {rdtype}")
        if rcode == "BADRESP":
            return ServerFailure(rcode, f"the DNS server sent an unusable answer for {name} {rdtype}")
        return ServerFailure(rcode, f"the DNS server answered {rcode} for {name} {rdtype}")
    text = exc.args[1] if len(exc.args) > 1 else "unknown error"
    return ResolverError(f"DNS query for {name} {rdtype} failed: {text}")


def _host(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _to_record(rr: Any) -> DnsRecord | None:
    """Text form of one pycares record; ``None`` for types we do not render."""
    type_name = _TYPE_NAMES.get(rr.type)
    if type_name is None:
        return None
    data = rr.data
    if type_name in ("A", "AAAA"):
        text = data.addr
    elif type_name == "MX":
        text = f"{data.priority} {_host(data.exchange) or '.'}"
    elif type_name == "TXT":
        text = data.data.decode("utf-8", errors="replace")
    elif type_name == "CNAME":
        text = _host(data.cname)
    elif type_name == "NS":
        text = _host(data.nsdname)
    elif type_name == "PTR":
        text = _host(data.dname)
    elif type_name == "SOA":
        text = (
            f"{_host(data.mname) or '.'} {_host(data.rname) or '.'} {data.serial} {data.refresh} "
            f"{data.retry} {data.expire} {data.minimum}"
        )
    elif type_name == "SRV":
        text = f"{data.priority} {data.weight} {data.port} {_host(data.target) or '.'}"
    else:  # CAA
        text = f'{data.critical} {data.tag} "{data.value}"'
    return DnsRecord(name=_host(rr.name), type=type_name, ttl=int(rr.ttl), data=text)
