"""Structured logs: one JSON object per line in production, readable text on a terminal."""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import sys
import time
from typing import Any

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


_JSON_PREFIX = '{{"time": "{}", "level": "info", "logger": "ipintel.access", "message": "request", '


class AccessLog:
    """The per-request access line, written without the ``logging`` machinery.

    An access line per request through ``logging`` costs about 25 µs
    (record creation, handler lock, formatter, a flush per line), a tenth of
    a whole request on the hot path. This writer formats one small dict and
    buffers the lines, flushing at most every ``interval`` seconds and at
    shutdown, so a busy server makes one write system call per batch.
    """

    def __init__(self, fmt: str = "json", stream: Any = None, interval: float = 0.2) -> None:
        self.fmt = fmt
        self.stream = stream
        self.interval = interval
        self.enabled = False  # until configure(): library users and tests get no stray output
        self._lines: list[str] = []
        self._handle: Any = None
        self._second = -1
        self._stamp = ""

    def _timestamp(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:  # strftime once a second, not once a request
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int(now * 1000) % 1000:03d}Z"

    def _append(self, line: str) -> None:
        self._lines.append(line)
        if self._handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._handle = loop.call_later(self.interval, self.flush)

    def write(self, entry: dict[str, Any]) -> None:
        if not self.enabled:
            return
        stamp = self._timestamp()
        if self.fmt == "json":
            self._append(_JSON_PREFIX.format(stamp) + json.dumps(entry, separators=(", ", ": "))[1:])
        else:
            self._append(f"{stamp[11:19]} INFO    ipintel.access: " + " ".join(f"{k}={v}" for k, v in entry.items()))

    def write_request(
        self, request_id: str, method: str, route: str, status: int, seconds: float, client: str | None
    ) -> None:
        """The access line of one request. Every field is either ours (route
        template, status, duration) or already validated (the request id
        matches a safe token pattern, the method is an HTTP token), so the JSON
        is formatted directly; anything else takes the general path."""
        if not self.enabled:
            return
        duration = round(seconds * 1000, 3)
        if self.fmt != "json" or not method.isalpha():
            self.write(
                {
                    "request_id": request_id,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": duration,
                    "client": client,
                }
            )
            return
        client_json = json.dumps(client)  # normally an address, but a unix socket peer is a path
        self._append(
            f'{{"time": "{self._timestamp()}", "level": "info", "logger": "ipintel.access", '
            f'"message": "request", "request_id": "{request_id}", "method": "{method}", "route": {json.dumps(route)}, '
            f'"status": {status}, "duration_ms": {duration}, "client": {client_json}}}'
        )

    def flush(self) -> None:
        self._handle = None
        if self._lines:
            lines, self._lines = self._lines, []
            stream = self.stream or sys.stderr
            try:
                stream.write("\n".join(lines) + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stream at exit: nothing left to tell
                pass


access_log = AccessLog()


def configure(fmt: str = "json", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    access_log.fmt = fmt
    access_log.enabled = logging.getLogger("ipintel.access").isEnabledFor(logging.INFO)
    for noisy in ("hypercorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)


atexit.register(access_log.flush)
