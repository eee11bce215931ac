"""How a REST route is declared: one :class:`Endpoint` carries the handler and
everything the OpenAPI document and the rate limiter need to know about it.

Handlers are thin: they read path and query parameters, call one
:class:`~ipintel.service.Intel` method and return its ``data`` object. Errors
are raised as :class:`~ipintel.errors.ApiError` and rendered here.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ipintel.encoding import dumps
from ipintel.errors import ApiError

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
    scope: str | None  # rate-limit scope (docs/API.md#rate-limits), None when not limited
    description: str = ""
    parameters: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    tags: tuple[str, ...] = ()

    def route(self) -> Route:
        return Route(self.path, EndpointApp(self.handler), methods=["GET"], name=self.operation_id)


_JSON = (b"content-type", b"application/json")


class EndpointApp:
    """The ASGI app of one endpoint: runs the handler and sends its answer itself.

    A function endpoint would have Starlette build a Response object and wrap
    ``send`` in one more exception-handling layer for every request; sending
    the two ASGI messages directly is most of what a cached answer costs.
    An exception other than :class:`ApiError` is a bug: it propagates to the
    request middleware, which answers the JSON 500."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: list[tuple[bytes, bytes]]
        try:
            data = await self.handler(Request(scope, receive), scope["app"].state.intel)
            status, body, headers = 200, render_data(data), [_JSON]
        except ApiError as error:
            status, body = error.status, render_error(error)
            headers = [_JSON, *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items())]
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


# Rendered bodies of recent data objects, by identity. A cached answer is the
# same (never mutated) object every time it is served, so its JSON is encoded
# once; the entry holds the object itself, so its id cannot be reused while
# the entry lives. Bounded: emptied when full.
_RENDERED: dict[int, tuple[object, bytes]] = {}
_RENDERED_MAX = 4096
_RENDERED_MAX_BODY = 4096


def render_data(data: dict[str, Any]) -> bytes:
    """``{"data": data}`` as JSON bytes (Starlette's JSONResponse encoding)."""
    known = _RENDERED.get(id(data))
    if known is not None and known[0] is data:
        return known[1]
    body = dumps({"data": data})
    if len(body) <= _RENDERED_MAX_BODY:  # big answers (long DNS lists) are not worth holding
        if len(_RENDERED) >= _RENDERED_MAX:
            _RENDERED.clear()
        _RENDERED[id(data)] = (data, body)
    return body


def render_error(error: ApiError) -> bytes:
    return dumps(error.to_dict())


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


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.to_dict(), status_code=error.status, headers=error.headers or None)


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
