"""aioresponses that works with aiohttp 3.14+.

aiohttp 3.14 (a security release) added a required ``stream_writer``
argument to ``ClientResponse.__init__``; aioresponses 0.7.9, the latest
release, does not pass it, so every mocked request fails with a TypeError
(pnuckowski/aioresponses#289). :class:`mock_http` is aioresponses with a
response class that supplies the argument; with an older aiohttp it is plain
aioresponses. Use it wherever aioresponses would be used::

    with mock_http() as mock:
        mock.get("https://rdap.arin.net/registry/ip/8.8.8.8", payload={...})
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

from aiohttp import ClientResponse
from aioresponses import aioresponses

# What a finished upload looks like to ClientResponse: it only reads output_size.
_SENT_REQUEST: Any = SimpleNamespace(output_size=0)


class _CompatResponse(ClientResponse):
    def __init__(self, method: str, url: Any, *, stream_writer: Any = None, **kwargs: Any) -> None:
        super().__init__(method, url, stream_writer=stream_writer or _SENT_REQUEST, **kwargs)


_NEEDS_STREAM_WRITER = "stream_writer" in inspect.signature(ClientResponse.__init__).parameters


class mock_http(aioresponses):
    """aioresponses, named alike; see the module docstring."""

    def __enter__(self) -> mock_http:
        super().__enter__()
        return self

    def add(self, url: Any, method: str = "GET", *args: Any, response_class: Any = None, **kwargs: Any) -> None:
        if response_class is None and _NEEDS_STREAM_WRITER:
            response_class = _CompatResponse
        super().add(url, method, *args, response_class=response_class, **kwargs)  # type: ignore[misc]
