"""The check of a request's ``Host`` (docs/CONFIGURATION.md, ``IPINTEL_ALLOWED_HOSTS``): DNS rebinding.

A web page can rebind its own name to 127.0.0.1 and have the visitor's browser send requests to a service on
the visitor's machine, with the page's name in ``Host``; the answers are then the page's to read (same
origin). A server that answers only the names it is known by cannot be read that way: the browser always
sends the name it resolved. The middleware answers any other name 421 ``misdirected_request`` before the
request does anything (no token spent, no lookup made).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import Scope

from ipintel.infra.memo import BoundedMemo

_MEMO = 1024  # Host values whose verdict is remembered: a server is known by few names


def host_name(value: str) -> str:
    """The name of a ``Host`` value, without its port, lower case, without a final dot (``[::1]:80`` ->
    ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    else:
        name, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or ":" in name:
            name = value
    return name.rstrip(".")


class HostCheck:
    """Whether a request's ``Host`` names this server: one of ``allowed`` (exact names and addresses,
    ``*.domain`` for its subdomains)."""

    def __init__(self, allowed: Sequence[str]) -> None:
        self.exact = frozenset(h for h in allowed if not h.startswith("*."))
        self.suffixes = tuple(h[1:] for h in allowed if h.startswith("*."))  # ".example.com"
        self._known: BoundedMemo[bytes, bool] = BoundedMemo(_MEMO)

    def allows(self, scope: Scope) -> bool:
        value = None
        for name, raw in scope.get("headers", ()):
            if name == b"host":
                value = raw
                break
        if value is None:
            return True  # HTTP/1.0 without Host: not a browser's request, nothing a page can rebind
        known = self._known.get(value)
        if known is None:
            host = host_name(value.decode("latin-1"))
            known = host in self.exact or host.endswith(self.suffixes)
            if len(value) <= 256:
                self._known[value] = known
        return known
