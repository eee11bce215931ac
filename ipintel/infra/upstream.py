"""The one HTTP client for every upstream (RDAP, reputation APIs, feeds): one pooled session per process, a total
timeout and a body size cap on every call, every failure an :class:`UpstreamTimeout` or :class:`UpstreamError`.
Redirects are followed only by :meth:`HttpClient.get_following_redirects`, under the one redirect policy.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ipintel import __version__
from ipintel.errors import UpstreamError, UpstreamTimeout
from ipintel.infra.stats import UpstreamStats

USER_AGENT = f"ipintel/{__version__} (+https://github.com/ipintel/ipintel)"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class HttpResponse:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()


@dataclass(frozen=True)
class FollowedResponse:
    """The answer at the end of a redirect chain, and every URL asked on the way to it."""

    response: HttpResponse
    urls: tuple[str, ...]  # first: the URL given; last: the one that answered


RedirectProblem = Literal["invalid", "non-http", "downgrade", "loop", "too-many"]


class RedirectRefused(UpstreamError):
    """A redirect the policy does not follow (502).

    ``problem`` names the rule it broke, so that each caller can word it for
    its own upstream; ``current`` is the URL that redirected and ``target``
    where to (``None``: the ``Location`` is not a URL)."""

    def __init__(self, problem: RedirectProblem, current: str, target: URL | None) -> None:
        super().__init__(f"{current} redirected to {target if target is not None else 'an invalid URL'}: {problem}")
        self.problem: RedirectProblem = problem
        self.current = current
        self.target = target


def _next_hop(current: str, location: str, *, seen: Sequence[str]) -> str:
    """Where a redirect from ``current`` to ``location`` leads, if it may be followed.

    A relative ``Location`` is resolved against ``current``; only http and
    https are followed; HTTPS never leads to HTTP (a downgrade would let anyone
    on the path rewrite the answer); a target in ``seen`` is a loop. The
    fragment is dropped: it is never sent."""
    try:
        target = URL(current).join(URL(location))
    except ValueError:
        raise RedirectRefused("invalid", current, None) from None
    if target.scheme not in ("http", "https") or not target.host:
        raise RedirectRefused("non-http", current, target)
    if URL(current).scheme == "https" and target.scheme == "http":
        raise RedirectRefused("downgrade", current, target)
    text = str(target.with_fragment(None))
    if text in seen:
        raise RedirectRefused("loop", current, target)
    return text


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

    async def get_following_redirects(
        self,
        url: str,
        *,
        max_redirects: int,
        refuse_loops: bool,
        what: Callable[[str], str],
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_bytes: int = 2 * 1024 * 1024,
        source: str = "http",
        before_request: Callable[[str], None] | None = None,
    ) -> FollowedResponse:
        """GET ``url``, following up to ``max_redirects`` redirects, each checked before it is followed
        (:func:`_next_hop`); a refused hop, or one past ``max_redirects`` (``too-many``), raises
        :class:`RedirectRefused`. With ``refuse_loops`` a URL met twice is ``loop``, else a loop ends as
        ``too-many``. ``what`` names each URL's upstream in messages; ``before_request`` may refuse a URL by raising."""
        urls = [url]
        while True:
            if before_request is not None:
                before_request(url)
            response = await self.get(
                url, headers=headers, timeout=timeout, max_bytes=max_bytes, what=what(url), source=source
            )
            location = response.headers.get("Location", "").strip() if response.status in REDIRECT_STATUSES else ""
            if not location:  # also a redirect status without Location: the caller's rules for statuses apply
                return FollowedResponse(response, tuple(urls))
            target = _next_hop(url, location, seen=urls if refuse_loops else ())
            if len(urls) > max_redirects:  # at most max_redirects + 1 requests, each with its own timeout
                raise RedirectRefused("too-many", url, URL(target))
            urls.append(target)
            url = target

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
        # Never a raw aiohttp exception: callers handle only our own error model.
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
