"""A local RDAP world for tests: IANA bootstrap files and RDAP registries on 127.0.0.1.

One aiohttp server on a free port plays IANA and every registry. Registries
live under path prefixes (``/arin/``, ``/ripe/`` ...), so the bootstrap files
it serves point at ``http://127.0.0.1:<port>/<registry>/``. Each path answers
what the test told it to with :meth:`RdapServer.set`, and every request is
counted in :attr:`RdapServer.hits` (robustness tests and benchmarks reuse
this server)::

    async with rdap_server({"arin": ["3.0.0.0/8"], "ripe": ["193.0.0.0/8"]}) as rdap:
        rdap.set(rdap.ip_path("arin", "3.3.3.3"), Reply.json(doc))
        rdap.set(rdap.ip_path("ripe", "193.0.6.1"), Reply.html_429())
        settings = settings.replace(rdap_bootstrap_url=rdap.bootstrap_url)

Unconfigured paths answer an RDAP 404 error object, as registries do for
space they do not hold (or :attr:`RdapServer.default` when set).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.fixtures import load_json

RDAP_JSON = "application/rdap+json"

# The registries of the tests' RDAP world (the ``rdap`` fixture) and the space each holds.
REGISTRIES: dict[str, list[str]] = {
    "arin": ["3.0.0.0/8", "23.0.0.0/8", "2600::/12"],
    "ripe": ["185.0.0.0/8", "91.0.0.0/8", "2a00::/12"],
    "apnic": ["101.0.0.0/8", "14.0.0.0/8"],
    "lacnic": ["200.0.0.0/8", "177.0.0.0/8"],
    "afrinic": ["41.0.0.0/8"],
}


# The AS numbers each registry holds in that world (asn.json), in the bootstrap's "first-last" notation.
AUTNUMS: dict[str, list[str]] = {
    "arin": ["1-1876", "13335", "15169", "16509"],
    "ripe": ["1877-1901", "3333", "20712"],
    "apnic": ["4608-4865"],
    "lacnic": ["27648-28671"],
    "afrinic": ["36864-37887"],
}


def rdap_fixture(name: str) -> dict[str, Any]:
    """A registry answer (``tests/fixtures/rdap/<name>.json``), freshly parsed: written for the tests
    and modelled on what each RIR sends, or a real answer (tests/fixtures/README.md says which)."""
    document: dict[str, Any] = load_json(f"rdap/{name}.json")
    return document


# What RIPE's rate limiter answers: an HTML page, not an RDAP error object.
RIPE_429_HTML = b"""<!DOCTYPE html>
<html><head><title>429 Too Many Requests</title></head>
<body><h1>Too Many Requests</h1><p>You have exceeded the query limit. Please slow down.</p></body></html>
"""


@dataclass(frozen=True)
class Reply:
    """One canned answer. ``delay`` seconds pass before the headers are sent;
    ``chunks`` > 0 streams the body in that many pieces without a
    Content-Length (so a size cap has to count bytes as they arrive)."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = RDAP_JSON
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: int = 0
    drop: bool = False  # close the connection without an answer (a registry that is down)

    @classmethod
    def json(cls, document: Any, *, status: int = 200, content_type: str = RDAP_JSON, delay: float = 0.0) -> Reply:
        return cls(status, json.dumps(document).encode(), content_type, delay=delay)

    @classmethod
    def redirect(cls, location: str, *, status: int = 302) -> Reply:
        return cls(status, b"", None, headers={"Location": location})

    @classmethod
    def not_found(cls) -> Reply:
        return cls.json(rdap_error(404, "Not Found"), status=404)

    @classmethod
    def html_429(cls) -> Reply:
        return cls(429, RIPE_429_HTML, "text/html", headers={"Retry-After": "60"})

    @classmethod
    def server_error(cls, status: int = 503) -> Reply:
        return cls.json(rdap_error(status, "Service Unavailable"), status=status)

    @classmethod
    def invalid_json(cls) -> Reply:
        return cls(200, b'{"objectClassName": "ip network", "handle": ', RDAP_JSON)

    @classmethod
    def oversized(cls, size: int, *, streamed: bool = False) -> Reply:
        """A syntactically plausible JSON body of ``size`` bytes."""
        padding = max(0, size - 40)
        body = b'{"objectClassName": "ip network", "x": "' + b"a" * padding + b'"}'
        return cls(200, body, RDAP_JSON, chunks=64 if streamed else 0)

    @classmethod
    def slow(cls, delay: float, document: Any | None = None) -> Reply:
        return cls.json(document if document is not None else rdap_error(200, "late"), delay=delay)

    @classmethod
    def dropped(cls) -> Reply:
        """No answer at all: the connection is closed once the request has arrived."""
        return cls(0, b"", None, drop=True)


def rdap_error(code: int, title: str) -> dict[str, Any]:
    return {"rdapConformance": ["rdap_level_0"], "errorCode": code, "title": title, "description": []}


def bootstrap_document(services: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, Any]:
    """An RFC 9224 bootstrap file: ``[(prefixes, service URLs), ...]``."""
    return {
        "description": "RDAP bootstrap file for tests",
        "publication": "2024-01-01T00:00:00Z",
        "version": "1.0",
        "services": [[list(prefixes), list(urls)] for prefixes, urls in services],
    }


class RdapServer:
    """The running server; see the module docstring."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.default: Reply | None = None  # what unconfigured paths answer; None: an RDAP 404
        self.hits: Counter[str] = Counter()
        self.base_url = ""
        self.in_flight = 0
        # Requests under way and the most there were at once, per path prefix (a registry, or "bootstrap").
        self.in_flight_at: Counter[str] = Counter()
        self.peak_at: Counter[str] = Counter()

    # Addresses ---------------------------------------------------------------

    @property
    def bootstrap_url(self) -> str:
        return f"{self.base_url}/bootstrap/"

    def registry_url(self, registry: str) -> str:
        """The base URL of a registry as a bootstrap file lists it (with its trailing slash)."""
        return f"{self.base_url}/{registry}/"

    def ip_path(self, registry: str, address: str) -> str:
        """The path a client asks for ``address`` at ``registry`` (``/arin/ip/3.3.3.3``)."""
        return f"/{registry}/ip/{ipaddress.ip_address(address)}"

    def autnum_path(self, registry: str, number: int) -> str:
        """The path a client asks for AS ``number`` at ``registry`` (``/arin/autnum/15169``)."""
        return f"/{registry}/autnum/{number}"

    def url(self, path: str) -> str:
        return self.base_url + path

    # Behaviour ----------------------------------------------------------------

    def set(self, path: str, reply: Reply) -> None:
        self.replies[path] = reply

    def set_bootstrap(self, version: int, document: Any, *, reply: Reply | None = None) -> None:
        self.set(f"/bootstrap/ipv{version}.json", reply or Reply.json(document, content_type="application/json"))

    def serve_registries(
        self, registries: Mapping[str, Sequence[str]], autnums: Mapping[str, Sequence[str]] = AUTNUMS
    ) -> None:
        """Bootstrap files mapping each registry's prefixes (``ipv4.json``, ``ipv6.json``) and AS numbers
        (``asn.json``, from ``autnums``, for the registries of ``registries``) to its base URL here (HTTP only)."""
        for version in (4, 6):
            services = []
            for registry, prefixes in registries.items():
                mine = [p for p in prefixes if ipaddress.ip_network(p).version == version]
                if mine:
                    services.append((mine, [self.registry_url(registry)]))
            self.set_bootstrap(version, bootstrap_document(services))
        self.set_asn_bootstrap(
            bootstrap_document(
                [(autnums[registry], [self.registry_url(registry)]) for registry in registries if registry in autnums]
            )
        )

    def set_asn_bootstrap(self, document: Any, *, reply: Reply | None = None) -> None:
        self.set("/bootstrap/asn.json", reply or Reply.json(document, content_type="application/json"))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[path] += 1
        reply = self.replies.get(path) or self.default or Reply.not_found()
        self.in_flight += 1
        prefix = path.split("/")[1] if path.count("/") > 1 else ""
        self.in_flight_at[prefix] += 1
        self.peak_at[prefix] = max(self.peak_at[prefix], self.in_flight_at[prefix])
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.drop:
                assert request.transport is not None
                request.transport.close()
                return web.Response()  # never sent: the connection is gone
            if reply.chunks:
                response = web.StreamResponse(status=reply.status, headers=dict(reply.headers))
                if reply.content_type:
                    response.content_type = reply.content_type
                response.enable_chunked_encoding()
                await response.prepare(request)
                step = max(1, len(reply.body) // reply.chunks)
                for start in range(0, len(reply.body), step):
                    await response.write(reply.body[start : start + step])
                await response.write_eof()
                return response
            headers = dict(reply.headers)
            if reply.content_type:  # as given, parameters included (aiohttp would refuse a charset here)
                headers["Content-Type"] = reply.content_type
            return web.Response(status=reply.status, body=reply.body, headers=headers)
        finally:
            self.in_flight -= 1
            self.in_flight_at[prefix] -= 1


@contextlib.asynccontextmanager
async def rdap_server(registries: Mapping[str, Sequence[str]] | None = None) -> AsyncIterator[RdapServer]:
    """Start an :class:`RdapServer` on 127.0.0.1 (free port); ``registries`` pre-loads the bootstrap."""
    server = RdapServer()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", server._handle)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.base_url = f"http://127.0.0.1:{port}"
    if registries:
        server.serve_registries(registries)
    try:
        yield server
    finally:
        await runner.cleanup()
