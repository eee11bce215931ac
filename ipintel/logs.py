"""Structured logs: one JSON object per line in production, readable text on a terminal.

``IPINTEL_LOG_FORMAT`` (:attr:`Settings.log_format`) says which; ``auto``, the
default, looks at the stream the logs go to (standard error): text when it is
a terminal, JSON otherwise (a container, a pipe, a file)."""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ipintel.infra.memo import BoundedMemo

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_"))
        line = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if extras:
            line += f"  [{extras}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_QUOTED: BoundedMemo[str | None, str] = BoundedMemo(4096)


def _quoted(text: str | None) -> str:
    """``text`` as a JSON string (or ``null``). Route templates and callers'
    addresses repeat from request to request, so their JSON forms are remembered."""
    known = _QUOTED.get(text)
    if known is None:
        known = _QUOTED[text] = json.dumps(text)  # a unix socket peer is a path: quoting is needed
    return known


_MILLISECONDS = [f".{ms:03d}Z" for ms in range(1000)]  # a timestamp's tail, formatted once

# One request as the hot path records it: (time, request id, method, route, status, seconds, client, the API
# key's name or None).
_Request = tuple[float, str, str, str, int, float, "str | None", "str | None"]


# An access line per request through ``logging`` costs about 25 µs (record creation, handler lock, formatter, a
# flush per line), a tenth of a whole request on the hot path. Batched, it is one write system call per batch,
# and the formatting runs in one loop instead of a little in every request.
class AccessLog:
    """The per-request access line, written without the ``logging`` machinery: a request appends a tuple of its
    fields to a buffer, and the lines are formatted and written in a batch, at most every ``interval`` seconds,
    when ``max_pending`` requests wait (which bounds the buffer), and at shutdown."""

    def __init__(self, fmt: str = "json", stream: Any = None, interval: float = 0.2, max_pending: int = 4096) -> None:
        self.fmt = fmt
        self.stream = stream
        self.interval = interval
        self.max_pending = max_pending
        self.enabled = False  # until configure(): library users and tests get no stray output
        self._pending: list[_Request] = []
        self._handle: Any = None
        self._second = -1
        self._stamp = ""

    def _timestamp(self, now: float) -> str:
        second = int(now)
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return self._stamp + _MILLISECONDS[int(now * 1000) % 1000]

    def _append(self, entry: _Request) -> None:
        pending = self._pending
        pending.append(entry)
        if self._handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._handle = loop.call_later(self.interval, self.flush)
        elif len(pending) >= self.max_pending:
            self.flush()

    def write_request(
        self,
        request_id: str,
        method: str,
        route: str,
        status: int,
        seconds: float,
        client: str | None,
        key: str | None = None,
    ) -> None:
        """The access line of one request (formatted later, in the batch). ``key``: the name of the API key
        the request was accepted with (docs/API.md#authentication), a ``key`` field only then."""
        if self.enabled:
            self._append((time.time(), request_id, method, route, status, seconds, client, key))

    def _format(self, entry: _Request) -> str:
        now, request_id, method, route, status, seconds, client, key = entry
        stamp = self._timestamp(now)
        duration = f"{seconds * 1000:.3f}"  # a JSON number; five times cheaper than repr(round(...))
        if self.fmt == "json" and method.isalpha():
            # Every field is ours (route template, status, duration) or already
            # validated (the request id matches a safe token pattern, the method
            # is letters), so the JSON is formatted directly.
            return (
                f'{{"time": "{stamp}", "level": "info", "logger": "ipintel.access", '
                f'"message": "request", "request_id": "{request_id}", "method": "{method}", '
                f'"route": {_quoted(route)}, "status": {status}, "duration_ms": {duration}, '
                f'"client": {_quoted(client)}' + ("}" if key is None else f', "key": {_quoted(key)}}}')
            )
        fields = {
            "request_id": request_id,
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": float(duration),
            "client": client,
        }
        if key is not None:
            fields["key"] = key
        if self.fmt == "json":
            head = f'{{"time": "{stamp}", "level": "info", "logger": "ipintel.access", "message": "request", '
            return head + json.dumps(fields, separators=(", ", ": "))[1:]
        return f"{stamp[11:19]} INFO    ipintel.access: " + " ".join(f"{k}={v}" for k, v in fields.items())

    def flush(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._pending:
            pending, self._pending = self._pending, []
            stream = self.stream or sys.stderr
            try:
                for chunk in _whole_lines(map(self._format, pending)):
                    stream.write(chunk)
                    stream.flush()
            except (OSError, ValueError):  # a closed stream at exit: nothing left to tell
                pass


# A write to a pipe is atomic up to PIPE_BUF (4,096 bytes on Linux): with several workers writing to one
# pipe, a larger write can interleave with another's and cut lines in two. Chunks stay under it (with room
# for characters that take more than one byte).
_ATOMIC_WRITE_CHARS = 3000


def _whole_lines(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` joined into chunks of whole lines, each under :data:`_ATOMIC_WRITE_CHARS` when it can be."""
    chunk: list[str] = []
    size = 0
    for line in lines:
        if chunk and size + len(line) + 1 > _ATOMIC_WRITE_CHARS:
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(line + "\n")
        size += len(line) + 1
    if chunk:
        yield "".join(chunk)


access_log = AccessLog()


def choose_format(fmt: str, stream: Any) -> str:
    """``json`` or ``text`` for a configured format: ``auto`` is text when
    ``stream`` is a terminal, JSON otherwise."""
    if fmt in ("json", "text"):
        return fmt
    if fmt != "auto":
        raise ValueError(f"log format must be 'text', 'json' or 'auto', not {fmt!r}")
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, OSError, ValueError):  # no isatty(), or a closed stream: not a terminal
        return "json"


def configure(fmt: str = "auto", level: str = "INFO", stream: Any = None) -> str:
    """Send every log record and the access log to ``stream`` (standard error
    when None) in ``fmt`` (``text``, ``json`` or ``auto``); returns the
    format chosen."""
    target = sys.stderr if stream is None else stream
    fmt = choose_format(fmt, target)
    handler = logging.StreamHandler(target)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    access_log.fmt = fmt
    access_log.stream = stream  # None: whatever sys.stderr is when a batch is written
    access_log.enabled = logging.getLogger("ipintel.access").isEnabledFor(logging.INFO)
    for noisy in ("hypercorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return fmt


atexit.register(access_log.flush)
