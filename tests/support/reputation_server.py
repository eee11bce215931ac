"""A local stand-in for IP reputation APIs (StopForumSpam, AbuseIPDB) on 127.0.0.1.

A real aiohttp server, so the service's pooled HttpClient, its timeouts and
its body caps are exercised over real sockets:

    async with ReputationServer() as api:
        api.respond(body=SFS_CLEAN)                     # StopForumSpam: never reported (the default)
        api.respond(status=503, body="busy")           # text bodies are sent as text/plain
        api.respond(body={...}, delay=2.0)             # answer late (a timeout)
        settings = settings.replace(reputation_url=api.url("/api"))
        ...
        assert api.requests[-1].query["ip"] == "8.8.8.8"

Every path answers with the current response; ``requests`` logs what arrived.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

# StopForumSpam's answer for an address nobody reported.
SFS_CLEAN = {"success": 1, "ip": {"appears": 0, "frequency": 0}}


@dataclass(frozen=True)
class SeenRequest:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    raw_query: str


@dataclass
class Response:
    status: int = 200
    body: Any = field(default_factory=lambda: SFS_CLEAN)
    delay: float = 0.0


class ReputationServer:
    def __init__(self) -> None:
        self.response = Response()
        self.requests: list[SeenRequest] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    def respond(self, *, status: int = 200, body: Any = None, delay: float = 0.0) -> None:
        self.response = Response(status, {} if body is None else body, delay)

    def url(self, path: str = "/api") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append(
            SeenRequest(request.path, dict(request.query), dict(request.headers), request.query_string)
        )
        response = self.response
        if response.delay:
            await asyncio.sleep(response.delay)
        if isinstance(response.body, str | bytes):
            return web.Response(status=response.status, body=response.body, content_type="text/plain")
        return web.Response(status=response.status, text=json.dumps(response.body), content_type="application/json")

    async def __aenter__(self) -> ReputationServer:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only through the server's sockets
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
