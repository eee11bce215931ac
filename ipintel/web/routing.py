"""Starlette's router, with the routes a request is compared against picked by its first path segment."""

from __future__ import annotations

import re

from starlette.routing import BaseRoute, Match, Route, Router, compile_path
from starlette.types import Receive, Scope, Send


def first_segment(path: str) -> str:
    """``ip`` for ``/ip/8.8.8.8``: how routes are filed here and rate-limit rules in ``gate.py``."""
    return path[1:].partition("/")[0]


def strict_pattern(regex: re.Pattern[str]) -> re.Pattern[str]:
    """A Starlette route pattern ending at the end of the path: ``\\Z``, not ``$``.

    Starlette's patterns end in ``$``, which also matches before a final newline,
    so its router serves ``/cidr%0A`` as ``/cidr`` and ``/ip/1.1.1.1/vpn%0A`` as
    ``/ip/1.1.1.1/vpn``, while the same paths ending in a space are 404s."""
    if regex.pattern.endswith("$"):
        return re.compile(regex.pattern[:-1] + r"\Z", regex.flags)
    return regex


def path_pattern(path: str) -> re.Pattern[str]:
    """The pattern :class:`SegmentRouter` matches a route template with (the rate-limit rules use it too)."""
    return strict_pattern(compile_path(path)[0])


class SegmentRouter(Router):
    """A :class:`~starlette.routing.Router` that only tries the routes a request's first path segment can reach,
    with the same outcome as Starlette's (the route, a 405 from a partial match, a 404; their equality is tested)
    but two deliberate differences: a pattern ends at the end of the path (:func:`strict_pattern`), and a path
    a literal route spells exactly is that route's for every method (``GET /ip/batch`` is a 405 with ``Allow:
    POST``, not ``/ip/{ip}`` with the address ``batch``: docs/API.md#conventions).

    Starlette's router tries every pattern in turn, so a request for one of the last routes paid for matching a
    dozen others first, several microseconds of every request."""

    _index: dict[str, list[BaseRoute]] | None = None
    _everywhere: list[BaseRoute]
    _literal: dict[str, list[BaseRoute]]
    _indexed_routes: tuple[BaseRoute, ...] = ()

    def _candidates(self, path: str) -> list[BaseRoute]:
        assert self._index is not None  # built by app()
        return self._index.get(first_segment(path), self._everywhere)

    def _build_index(self) -> None:
        """File the routes by first segment; rebuilt when routes are added after the first request."""
        routes = tuple(self.routes)
        for route in routes:
            if isinstance(getattr(route, "path_regex", None), re.Pattern):
                route.path_regex = strict_pattern(route.path_regex)  # type: ignore[attr-defined]

        # A plain route whose first segment is literal (/ip/{ip} -> ip) is filed under it; any other (a parameter
        # first, a mount, a host) is a candidate for every request. Candidates keep their original order.
        def segment(route: BaseRoute) -> str | None:
            if type(route) is Route and route.path.startswith("/"):
                first = first_segment(route.path)
                if "{" not in first:
                    return first
            return None  # a candidate for every path

        segments = {s for s in map(segment, routes) if s is not None}
        self._index = {s: [r for r in routes if segment(r) in (s, None)] for s in segments}
        self._everywhere = [r for r in routes if segment(r) is None]
        self._literal = {}
        for route in routes:
            if type(route) is Route and not route.param_convertors:
                self._literal.setdefault(route.path, []).append(route)
        self._indexed_routes = routes

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._index is None or len(self._indexed_routes) != len(self.routes):
            self._build_index()  # also makes the routes' patterns strict for Starlette's own path below
        # Requests under a root_path, with redirect_slashes on, and other scopes take Starlette's own path.
        if scope["type"] != "http" or self.redirect_slashes or scope.get("root_path"):
            await super().app(scope, receive, send)
            return
        if "router" not in scope:
            scope["router"] = self
        partial = None
        partial_scope: Scope = {}
        path = scope["path"]
        for route in self._literal.get(path) or self._candidates(path):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial = route
                partial_scope = child_scope
        if partial is not None:  # the path matched, the method did not: 405
            scope["route"] = partial
            scope.update(partial_scope)
            await partial.handle(scope, receive, send)
            return
        await self.default(scope, receive, send)
