"""The one HTTP client for every upstream (RDAP, reputation APIs, feeds).

One pooled :class:`aiohttp.ClientSession` per process, created when the app
starts and closed when it stops, so connections to the registries are kept
alive and reused (docs/API.md#registry-rdap). Every call has a total timeout and a body size
cap; every failure becomes :class:`UpstreamTimeout` or :class:`UpstreamError`,
never a raw aiohttp exception, so callers only handle our own error model.
Redirects are not followed here: callers that follow them (RDAP) need to see
each hop to enforce their own rules.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from ipintel import __version__
from ipintel.errors import UpstreamError, UpstreamTimeout
from ipintel.infra.stats import UpstreamStats

USER_AGENT = f"ipintel/{__version__} (+https://github.com/ipintel/ipintel)"


@dataclass(frozen=True)
class HttpResponse:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()


class HttpClient:
    """A pooled aiohttp session with per-call timeouts and size caps."""

    def __init__(
        self,
        *,
        timeout: float,
        max_connections: int = 100,
        per_host: int = 10,
        stats: UpstreamStats | None = None,
    ) -> None:
        self.timeout = timeout
        self.stats = stats or UpstreamStats()
        self._max_connections = max_connections
        self._per_host = per_host
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=self._per_host,
                ttl_dns_cache=300,
                family=socket.AF_UNSPEC,
                enable_cleanup_closed=True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT},
                auto_decompress=True,
                raise_for_status=False,
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("HttpClient.start() was not awaited")
        return self._session

    async def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_bytes: int = 2 * 1024 * 1024,
        what: str = "upstream",
        source: str = "http",
    ) -> HttpResponse:
        """GET ``url`` without following redirects; the whole call (connect,
        headers, body) ends within ``timeout`` seconds.

        ``what`` names the upstream in error messages ("RDAP server
        rdap.arin.net"); ``source`` is its short name in the upstream
        statistics ("rdap", "reputation", "feed:tor")."""
        limit = self.timeout if timeout is None else timeout
        started = time.perf_counter()
        outcome = "error"
        try:
            response = await self._get(url, headers, params, limit, max_bytes, what)
            outcome = "ok" if response.status < 500 else "error"
            return response
        except UpstreamTimeout:
            outcome = "timeout"
            raise
        finally:
            self.stats.record(source, outcome, time.perf_counter() - started)

    async def _get(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        params: Mapping[str, str] | None,
        limit: float,
        max_bytes: int,
        what: str,
    ) -> HttpResponse:
        try:
            async with asyncio.timeout(limit):
                async with self.session.get(url, headers=headers, params=params, allow_redirects=False) as response:
                    declared = response.content_length
                    if declared is not None and declared > max_bytes:
                        raise UpstreamError(f"{what} answered with a body over {max_bytes} bytes")
                    body = await _read_capped(response, max_bytes, what)
                    # A case-insensitive copy: servers spell header names as they like
                    # ("location", "Content-Type"), and dict() would keep their spelling.
                    headers = CIMultiDictProxy(CIMultiDict(response.headers))
                    return HttpResponse(str(response.url), response.status, headers, body)
        except TimeoutError:
            raise UpstreamTimeout(f"{what} did not answer within {limit:g} s") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"{what} could not be reached: {type(exc).__name__}") from None


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int, what: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > max_bytes:
            raise UpstreamError(f"{what} answered with a body over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
