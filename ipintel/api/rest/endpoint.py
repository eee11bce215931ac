"""How a REST route is declared: one :class:`Endpoint` carries the handler and
everything the OpenAPI document and the rate limiter need to know about it.

Handlers are thin: they read path and query parameters, call one
:class:`~ipintel.service.Intel` method and return its ``data`` object. Errors
are raised as :class:`~ipintel.errors.ApiError`; the request middleware answers them.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ipintel.infra.limiter import Quota
from ipintel.web.responses import data_body, fresh_data_body, send_body

if TYPE_CHECKING:
    from ipintel.service import Intel

Handler = Callable[[Request, "Intel"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Endpoint:
    path: str  # Starlette path, e.g. "/ip/{ip}"
    handler: Handler
    operation_id: str
    summary: str
    schema: str  # file in schemas/ describing the `data` object, without ".json"
    errors: tuple[str, ...]  # error codes (docs/API.md#errors) this route can answer besides the common ones
    quota: Quota | None  # the rate-limit quota its requests spend (docs/API.md#rate-limits), None: not limited
    description: str = ""
    parameters: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    tags: tuple[str, ...] = ()
    method: str = "GET"  # "POST" for a route that takes a JSON body
    # Whether its answers come from a cache (the same object again and again), so that their encoded body is
    # worth remembering; a route that computes every answer afresh (/cidr) would only churn that memo.
    cached_answers: bool = True
    body_schema: str | None = None  # file in schemas/ describing that body

    def route(self) -> Route:
        app = EndpointApp(self.handler, remember=self.cached_answers)
        return Route(self.path, app, methods=[self.method], name=self.operation_id)


class EndpointApp:
    """The ASGI app of one endpoint: runs the handler and sends its answer itself.

    A function endpoint would have Starlette build a Response object and wrap
    ``send`` in one more exception-handling layer for every request; sending
    the two ASGI messages directly is most of what a cached answer costs.
    Exceptions (an :class:`ApiError`, or a bug) propagate to the request middleware, which answers them."""

    __slots__ = ("encode", "handler")

    def __init__(self, handler: Handler, *, remember: bool = True) -> None:
        self.handler = handler
        self.encode = data_body if remember else fresh_data_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        data = await self.handler(Request(scope, receive), scope["app"].state.intel)
        await send_body(send, 200, self.encode(data), head=scope["method"] == "HEAD")


_MEMO_QUERY_MAX = 512  # longer query strings are parsed every time, not remembered


@functools.lru_cache(maxsize=1024)
def _parsed_query(query_string: bytes) -> QueryParams:
    return QueryParams(query_string)


def query_params(request: Request) -> QueryParams:
    """The request's query parameters, as ``request.query_params`` gives them.

    Recent query strings are remembered parsed (bounded, and ``QueryParams``
    is immutable, so sharing one is safe): a busy client repeats the same
    few, and ``parse_qsl`` is a measurable part of an uncached ``/cidr``."""
    query_string = request.scope.get("query_string", b"")
    if len(query_string) <= _MEMO_QUERY_MAX:
        return _parsed_query(query_string)
    return request.query_params


def path_param(name: str, description: str, example: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
        "example": example,
    }


def query_param(
    name: str, description: str, example: str, *, required: bool = False, schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema or {"type": "string"},
        "example": example,
    }
