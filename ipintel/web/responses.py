"""The bodies of every JSON answer, and the raw ASGI messages that send them.

Three bodies (docs/API.md#conventions, docs/MCP.md): a success is
``{"data": ...}``, a REST failure ``{"error": {"code", "message"}}`` (from an
:class:`~ipintel.errors.ApiError`), and a refusal of ``/mcp`` before its
request was read is a JSON-RPC error with a null id. All are encoded by
:func:`ipintel.encoding.dumps`, the one encoder.

Answers on the hot path are sent as the two ASGI messages (start, then body
with its ``content-length``) rather than through Starlette's ``Response``:
building that object is a measurable share of a cached answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ipintel.encoding import dumps
from ipintel.errors import ApiError
from ipintel.infra.memo import BoundedMemo

JSON = b"application/json"

# JSON-RPC's "server error" code, which a refusal by the transport carries (the id is unknown: the request
# was not read).
RPC_SERVER_ERROR = -32000

Headers = Iterable[tuple[bytes, bytes]]

# Rendered bodies of recent data objects, by identity. A cached answer is the
# same (never mutated) object every time it is served, so its JSON is encoded
# once; the entry holds the object itself, so its id cannot be reused while
# the entry lives.
_RENDERED: BoundedMemo[int, tuple[object, bytes]] = BoundedMemo(4096)
_RENDERED_MAX_BODY = 4096  # big answers (long DNS lists) are not worth holding


def data_body(data: Mapping[str, Any]) -> bytes:
    """``{"data": data}``, the body of every success."""
    known = _RENDERED.get(id(data))
    if known is not None and known[0] is data:
        return known[1]
    body = dumps({"data": data})
    if len(body) <= _RENDERED_MAX_BODY:
        _RENDERED[id(data)] = (data, body)
    return body


def fresh_data_body(data: Mapping[str, Any]) -> bytes:
    """``{"data": data}`` for an answer computed afresh every time, which is never worth remembering."""
    return dumps({"data": data})


def error_body(error: ApiError) -> bytes:
    """``{"error": {"code", "message"}}``, the body of every REST failure (docs/API.md#errors)."""
    return dumps(error.to_dict())


def rpc_error(id_: str | int | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response (``data`` only when there is some), the body of every MCP failure."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": body}


def rpc_refusal_body(message: str, data: Mapping[str, Any]) -> bytes:
    """A JSON-RPC error answering a ``/mcp`` request that was refused before it was read (docs/MCP.md)."""
    return dumps(rpc_error(None, RPC_SERVER_ERROR, message, data))


def raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``{"Name": "value"}`` as ASGI headers (lower-case names, latin-1)."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


async def send_body(
    send: Send, status: int, body: bytes, headers: Headers = (), *, content_type: bytes = JSON, head: bool = False
) -> None:
    """Send a whole answer: its ``content-type`` and ``content-length``, then ``headers``, then the body
    (none for ``HEAD``, whose length is still the body's)."""
    start = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_error(send: Send, error: ApiError, headers: Headers = (), *, head: bool = False) -> None:
    """Send ``error`` as its status and REST error body, with its own headers and then ``headers``."""
    await send_body(send, error.status, error_body(error), [*raw_headers(error.headers), *headers], head=head)


def json_response(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``body`` as a Starlette ``Response``, for what must return one (function routes, exception handlers)."""
    return Response(body, status_code=status, headers=headers, media_type="application/json")


class RawResponse:
    """A finished answer as an ASGI app: what Starlette's ``Response`` would send, without building one."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str], content_type: bytes = JSON) -> None:
        self.status, self.body, self.headers, self.content_type = status, body, headers, content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_body(send, self.status, self.body, raw_headers(self.headers), content_type=self.content_type)
