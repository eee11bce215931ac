"""A programmable DNS server for tests: real DNS over UDP and TCP on 127.0.0.1.

The service's resolver (c-ares through aiodns) talks to it exactly as it
talks to a recursive resolver, so tests exercise the real wire protocol:
truncation and the retry over TCP, rcodes, timeouts.

    with DnsServer() as dns:
        dns.add("example.com", "A", "93.184.215.14")
        dns.add("example.com", "TXT", ["v=spf1 ", "-all"])     # one record, two strings
        dns.add("www.example.com", "CNAME", "example.com")      # chased like a resolver does
        dns.servfail("broken.test")                              # the name and every name below it
        dns.refuse("refused.test")
        dns.blackhole("silent.test")                              # never answered
        dns.delay = 0.05                                          # every answer 50 ms late, concurrently
        dns.hook(lambda name, qtype: Answer.a(name, "127.0.0.2") if name.endswith(".dnsbl.test") else None)
        settings = settings.replace(dns_servers=dns.servers)
        ...
        assert dns.count("example.com", "A") == 1

How a question is answered, first match wins:

1. a rule set by :meth:`servfail`, :meth:`refuse`, :meth:`blackhole` (name or suffix);
2. a hook (most recently added first): ``hook(name, qtype) -> Answer | None``,
   ``None`` passing the question on;
3. the zone: records of the type asked; else a CNAME at the name, chased
   through the zone (the CNAMEs come first in the answer, as a recursive
   resolver gives them); else NODATA when the name (or a name below it)
   exists; else NXDOMAIN.

Names are case-insensitive and written without the trailing dot.

Every answer waits ``delay`` seconds (or a rule's or hook's own delay) in
its own task, so concurrent questions are answered concurrently: N queries
with a 50 ms delay take about 50 ms, not N × 50 ms. The server runs its own
event loop in a thread, so it serves sync tests and tests that run a
hypercorn subprocess as well as async tests.

UDP answers larger than the client's buffer (512 bytes, or the EDNS size
the query offers) are truncated (TC bit, no records), as real servers do,
so the client must retry over TCP.

Note for tests that count queries: c-ares caches answers per resolver for
their TTL (NXDOMAIN only when an SOA is present, which this server never
sends). Give records ``ttl=0`` when every lookup must reach the server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from dnslib import AAAA, CNAME, MX, NS, PTR, QTYPE, RCODE, RR, SOA, SRV, TXT, A, DNSHeader, DNSQuestion, DNSRecord

RData = str | bytes | Sequence[str | bytes]

# Rcodes a rule or hook may answer with, and the pseudo-rcode DROP: no answer at all.
DROP = "DROP"
_RCODES = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", DROP}


def _norm(name: str) -> str:
    return name.lower().rstrip(".")


def _under(name: str, suffix: str) -> bool:
    return name == suffix or name.endswith("." + suffix)


def reverse_name(ip: str) -> str:
    """The in-addr.arpa / ip6.arpa owner name of an address, without the trailing dot."""
    return ipaddress.ip_address(ip).reverse_pointer


@dataclass(frozen=True)
class Record:
    name: str
    type: str
    data: RData
    ttl: int = 300


@dataclass
class Answer:
    """What a hook returns: an rcode (or ``DROP``), records, an optional delay."""

    rcode: str = "NOERROR"
    records: list[Record] = field(default_factory=list)
    delay: float | None = None

    def __post_init__(self) -> None:
        if self.rcode not in _RCODES:
            raise ValueError(f"unknown rcode {self.rcode!r}")

    @classmethod
    def of(cls, name: str, rtype: str, *data: RData, ttl: int = 300) -> Answer:
        """NOERROR with one record of ``rtype`` per ``data``."""
        return cls("NOERROR", [Record(_norm(name), rtype.upper(), d, ttl) for d in data])

    @classmethod
    def a(cls, name: str, *addresses: str, ttl: int = 300) -> Answer:
        return cls.of(name, "A", *addresses, ttl=ttl)

    @classmethod
    def nxdomain(cls) -> Answer:
        return cls("NXDOMAIN")

    @classmethod
    def nodata(cls) -> Answer:
        return cls("NOERROR")


@dataclass(frozen=True)
class Query:
    name: str
    type: str
    transport: str  # "udp" or "tcp"


Hook = Callable[[str, str], Answer | None]


def _rdata(rtype: str, data: RData):
    if rtype == "A":
        return A(str(data))
    if rtype == "AAAA":
        return AAAA(str(data))
    if rtype == "MX":
        preference, _, exchange = str(data).partition(" ")
        return MX(exchange.strip() or ".", int(preference))
    if rtype == "TXT":
        strings = [data] if isinstance(data, str | bytes) else list(data)
        chunks: list[bytes] = []
        for s in strings:
            raw = s.encode() if isinstance(s, str) else s
            # One character-string holds at most 255 bytes: longer text becomes several strings.
            chunks.extend([raw[i : i + 255] for i in range(0, len(raw), 255)] or [b""])
        return TXT(chunks)
    if rtype == "NS":
        return NS(str(data))
    if rtype == "CNAME":
        return CNAME(str(data))
    if rtype == "PTR":
        return PTR(str(data))
    if rtype == "SOA":
        mname, rname, *times = str(data).split()
        return SOA(mname, rname, tuple(int(t) for t in times) or (1, 3600, 600, 86400, 300))
    if rtype == "SRV":
        priority, weight, port, target = str(data).split()
        return SRV(int(priority), int(weight), int(port), target)
    raise ValueError(f"record type {rtype} is not supported by the test server")


class DnsServer:
    """A DNS server on 127.0.0.1 (UDP and TCP, one free port), run in a thread."""

    def __init__(self, *, delay: float = 0.0, host: str = "127.0.0.1", log_size: int = 100_000) -> None:
        self.host = host
        self.port = 0
        self.delay = delay
        self._zone: dict[str, dict[str, list[Record]]] = {}
        self._rules: list[tuple[str, str, float | None]] = []  # (suffix, rcode, delay)
        self._hooks: list[Hook] = []
        self._lock = threading.Lock()
        self.queries: collections.deque[Query] = collections.deque(maxlen=log_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    # Zone and behaviour -------------------------------------------------------

    def add(self, name: str, rtype: str, data: RData, ttl: int = 300) -> DnsServer:
        """Add one record; call again for more records of the same name and type."""
        rtype = rtype.upper()
        _rdata(rtype, data)  # fail here, in the test, rather than in the server thread
        record = Record(_norm(name), rtype, data, ttl)
        with self._lock:
            self._zone.setdefault(record.name, {}).setdefault(rtype, []).append(record)
        return self

    def add_ptr(self, ip: str, host: str, ttl: int = 300) -> DnsServer:
        return self.add(reverse_name(ip), "PTR", host, ttl)

    def remove(self, name: str, rtype: str | None = None) -> None:
        with self._lock:
            if rtype is None:
                self._zone.pop(_norm(name), None)
            else:
                self._zone.get(_norm(name), {}).pop(rtype.upper(), None)

    def servfail(self, suffix: str, *, delay: float | None = None) -> DnsServer:
        return self.rule(suffix, "SERVFAIL", delay=delay)

    def refuse(self, suffix: str, *, delay: float | None = None) -> DnsServer:
        return self.rule(suffix, "REFUSED", delay=delay)

    def blackhole(self, suffix: str) -> DnsServer:
        """Never answer questions for ``suffix`` and the names below it."""
        return self.rule(suffix, DROP)

    def slow(self, suffix: str, delay: float) -> DnsServer:
        """Answer ``suffix`` normally, ``delay`` seconds late."""
        return self.rule(suffix, "NOERROR", delay=delay)

    def rule(self, suffix: str, rcode: str, *, delay: float | None = None) -> DnsServer:
        """Answer every question for ``suffix`` (and names below it) with ``rcode``.

        ``NOERROR`` here means "answer from hooks and zone as usual", which
        with ``delay`` makes a slow zone."""
        if rcode not in _RCODES:
            raise ValueError(f"unknown rcode {rcode!r}")
        with self._lock:
            self._rules.append((_norm(suffix), rcode, delay))
        return self

    def hook(self, hook: Hook) -> Hook:
        """Add a hook (usable as a decorator): ``(name, qtype) -> Answer | None``."""
        with self._lock:
            self._hooks.insert(0, hook)
        return hook

    def clear(self) -> None:
        """Forget records, rules, hooks and the query log."""
        with self._lock:
            self._zone.clear()
            self._rules.clear()
            self._hooks.clear()
            self.queries.clear()

    # Query log -------------------------------------------------------------------

    def count(self, name: str | None = None, rtype: str | None = None, *, suffix: bool = False) -> int:
        """How many questions arrived, optionally for a name (or suffix) and type."""
        wanted = _norm(name) if name is not None else None
        return sum(
            1
            for q in list(self.queries)
            if (wanted is None or (_under(q.name, wanted) if suffix else q.name == wanted))
            and (rtype is None or q.type == rtype.upper())
        )

    def names(self) -> list[str]:
        return [q.name for q in list(self.queries)]

    # Settings helpers ------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def servers(self) -> tuple[tuple[str, int], ...]:
        """For ``settings.replace(dns_servers=...)`` and ``Resolver(servers=...)``."""
        return ((self.host, self.port),)

    @property
    def env(self) -> str:
        """For ``IPINTEL_DNS_SERVERS`` of a server subprocess."""
        return f"{self.host}:{self.port}"

    # Answering --------------------------------------------------------------------

    def resolve(self, name: str, qtype: str) -> Answer:
        """The answer to one question (the server logic, without the wire)."""
        name = _norm(name)
        with self._lock:
            rules = list(self._rules)
            hooks = list(self._hooks)
        extra_delay: float | None = None
        for suffix, rcode, delay in reversed(rules):
            if _under(name, suffix):
                if rcode != "NOERROR":
                    return Answer(rcode, delay=delay)
                extra_delay = delay
                break
        for hook in hooks:
            answer = hook(name, qtype)
            if answer is not None:
                if answer.delay is None:
                    answer.delay = extra_delay
                return answer
        answer = self._from_zone(name, qtype)
        answer.delay = extra_delay
        return answer

    def _from_zone(self, name: str, qtype: str) -> Answer:
        records: list[Record] = []
        seen: set[str] = set()
        with self._lock:
            while name not in seen and len(seen) < 16:
                seen.add(name)
                node = self._zone.get(name)
                if node is None:
                    if records or not any(_under(other, name) for other in self._zone):
                        return Answer("NXDOMAIN", records)
                    return Answer("NOERROR", records)  # an empty non-terminal: NODATA
                if qtype in node:
                    return Answer("NOERROR", records + node[qtype])
                if "CNAME" in node and qtype != "CNAME":
                    cname = node["CNAME"][0]
                    records.append(cname)
                    name = _norm(str(cname.data))
                    continue
                return Answer("NOERROR", records)  # NODATA
        return Answer("SERVFAIL")  # a CNAME loop: what a resolver answers

    def _respond(self, data: bytes, transport: str) -> tuple[bytes | None, float, int]:
        """(wire answer or None to stay silent, delay, the client's UDP size)."""
        try:
            request = DNSRecord.parse(data)
        except Exception:
            return None, 0.0, 512
        udp_size = 512
        for rr in request.ar:
            if rr.rtype == QTYPE.OPT:
                udp_size = max(512, int(rr.rclass))
        if not request.questions:
            return None, 0.0, udp_size
        question = request.questions[0]
        name = _norm(str(question.qname))
        qtype = QTYPE.get(question.qtype, str(question.qtype))
        self.queries.append(Query(name, qtype, transport))
        try:
            answer = self.resolve(name, qtype)
        except Exception:
            answer = Answer("SERVFAIL")
        delay = self.delay if answer.delay is None else answer.delay
        if answer.rcode == DROP:
            return None, delay, udp_size
        reply = DNSRecord(DNSHeader(id=request.header.id, qr=1, aa=1, ra=1, rd=request.header.rd), q=question)
        reply.header.rcode = getattr(RCODE, answer.rcode)
        for record in answer.records:
            reply.add_answer(
                RR(record.name, getattr(QTYPE, record.type), rdata=_rdata(record.type, record.data), ttl=record.ttl)
            )
        return reply.pack(), delay, udp_size

    @staticmethod
    def _truncated(wire: bytes) -> bytes:
        reply = DNSRecord.parse(wire)
        short = DNSRecord(
            DNSHeader(id=reply.header.id, qr=1, aa=1, ra=1, rd=reply.header.rd, tc=1, rcode=reply.header.rcode),
            questions=[DNSQuestion(q.qname, q.qtype, q.qclass) for q in reply.questions],
        )
        return short.pack()

    # Lifecycle --------------------------------------------------------------------

    def start(self) -> DnsServer:
        self._thread = threading.Thread(target=self._run, name=f"dns-server-{id(self):x}", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError("the test DNS server did not start") from self._error
        if not self._ready.is_set():
            raise RuntimeError("the test DNS server did not start in time")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> DnsServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        udp, tcp = await self._bind(loop)
        tasks = self._tasks
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            udp.close()
            tcp.close()
            for writer in list(self._writers):  # c-ares keeps TCP connections open: end them
                writer.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tcp.wait_closed(), 2)

    async def _bind(self, loop: asyncio.AbstractEventLoop) -> tuple[asyncio.DatagramTransport, asyncio.Server]:
        """UDP and TCP on the same free port (retrying if TCP finds it taken)."""
        last: OSError | None = None
        for _ in range(50):
            udp, _protocol = await loop.create_datagram_endpoint(
                lambda: _UdpProtocol(self), local_addr=(self.host, self.port or 0)
            )
            port = udp.get_extra_info("sockname")[1]
            try:
                tcp = await asyncio.start_server(self._tcp_client, self.host, port, reuse_address=True)
            except OSError as exc:
                last = exc
                udp.close()
                continue
            self.port = port
            return udp, tcp
        raise RuntimeError(f"no free port for UDP and TCP: {last}")

    def _spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_udp(self, transport: asyncio.DatagramTransport, data: bytes, addr: tuple[str, int]) -> None:
        wire, delay, udp_size = self._respond(data, "udp")
        if delay:
            await asyncio.sleep(delay)
        if wire is None or transport.is_closing():
            return
        if len(wire) > udp_size:
            wire = self._truncated(wire)
        transport.sendto(wire, addr)

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Length-prefixed messages; several may be in flight on one connection."""
        self._writers.add(writer)
        try:
            while True:
                header = await reader.readexactly(2)
                (length,) = struct.unpack("!H", header)
                data = await reader.readexactly(length)
                self._spawn(self._answer_tcp(writer, data))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer_tcp(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        wire, delay, _ = self._respond(data, "tcp")
        if delay:
            await asyncio.sleep(delay)
        if wire is None or writer.is_closing():
            return
        writer.write(struct.pack("!H", len(wire)) + wire)
        try:
            await writer.drain()
        except ConnectionError:
            pass


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.transport is not None:
            self.server._spawn(self.server._answer_udp(self.transport, data, addr))


def free_udp_tcp_port(host: str = "127.0.0.1") -> int:
    """A port free for both UDP and TCP right now (for servers that must bind it later)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind((host, 0))
            port = udp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind((host, port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no free port")
