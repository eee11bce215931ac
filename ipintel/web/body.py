"""A request body, read within a limit: the two routes that take one (``POST /mcp``, ``POST /ip/batch``).

Nothing a client sends may grow memory without bound: the body is read chunk
by chunk and never kept past the limit, and a declared ``Content-Length`` over
the limit is refused before reading. After deciding to refuse, up to
:data:`DRAIN_BYTES` more (within :data:`DRAIN_SECONDS`) is read and thrown
away before the 413 goes out: the server closes a connection whose body was
left unread, and a client that writes its whole body before reading (httpx,
the SDKs) would otherwise see a reset instead of the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request

DRAIN_BYTES = 4 * 1024 * 1024
DRAIN_SECONDS = 2.0


def is_json_media_type(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == "application/json"


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` once it would exceed ``limit``: never more than ``limit`` bytes are kept."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        if int(declared) <= limit + DRAIN_BYTES:
            await _discard(request.stream(), DRAIN_BYTES)
        return None
    body = bytearray()
    receive = request.receive
    while True:  # the ASGI messages themselves: Request.stream() costs a measurable share of a tools/call
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        if len(body) + len(chunk) > limit:
            if message.get("more_body", False):
                await _discard(request.stream(), DRAIN_BYTES)
            return None
        body += chunk
        if not message.get("more_body", False):
            return bytes(body)


async def _discard(chunks: AsyncIterator[bytes], budget: int) -> None:
    """Read and drop what is left of a refused body, up to ``budget`` bytes and :data:`DRAIN_SECONDS`."""
    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in chunks:
                budget -= len(chunk)
                if budget < 0:
                    return
