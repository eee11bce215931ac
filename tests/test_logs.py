"""IPINTEL_LOG_FORMAT (ipintel/logs.py): human-readable text when the logs go to a terminal, JSON otherwise
(containers, pipes, files), unless the variable says which. Terminals here are real pseudo-terminals."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from ipintel import logs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure() replaces the root handler and switches the access log on: put both back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    access = logs.access_log
    saved = access.fmt, access.stream, access.enabled
    yield
    access.flush()
    root.handlers[:] = handlers
    root.setLevel(level)
    access.fmt, access.stream, access.enabled = saved


def _read_all(fd: int) -> str:
    """Everything written to the other end of a pipe or pty until it is closed (a pty turns \\n into \\r\\n)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the pty's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def _open(kind: str) -> tuple[IO[str], int]:
    """A stream to log to (``tty``: a pseudo-terminal, ``pipe``: a pipe) and the fd its output is read from."""
    if kind == "tty":
        reader, writer = pty.openpty()
    else:
        reader, writer = os.pipe()
    return os.fdopen(writer, "w", buffering=1), reader


def _log_some(fmt: str, kind: str) -> tuple[str, str]:
    """Configure the logs onto a fresh terminal or pipe, write a record (with an extra field and an
    exception) and an access line; the format chosen and everything written."""
    stream, reader = _open(kind)
    try:
        assert stream.isatty() is (kind == "tty")
        chosen = logs.configure(fmt, "INFO", stream=stream)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("ipintel.test").exception("something failed", extra={"feed": "tor"})
        logs.access_log.write_request("req-1", "GET", "/ip/{ip}", 200, 0.0015, "192.0.2.7")
        logs.access_log.flush()
    finally:
        stream.close()
    try:
        return chosen, _read_all(reader)
    finally:
        os.close(reader)


@pytest.mark.parametrize(
    ("fmt", "kind", "expected"),
    [
        ("auto", "tty", "text"),
        ("auto", "pipe", "json"),
        ("text", "tty", "text"),
        ("text", "pipe", "text"),
        ("json", "tty", "json"),
        ("json", "pipe", "json"),
    ],
)
def test_the_format_chosen_for_each_value_on_a_terminal_and_off_one(fmt: str, kind: str, expected: str) -> None:
    chosen, output = _log_some(fmt, kind)
    assert chosen == expected
    lines = output.splitlines()
    if expected == "json":
        assert all(line.startswith("{") for line in lines), output
    else:
        assert not any(line.startswith("{") for line in lines), output


def test_json_lines_are_one_object_each() -> None:
    _, output = _log_some("json", "pipe")
    record, access = map(json.loads, output.splitlines())  # the exception stays inside its record's line
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
    assert {k: record[k] for k in ("level", "logger", "message", "feed")} == {
        "level": "error",
        "logger": "ipintel.test",
        "message": "something failed",
        "feed": "tor",
    }
    assert "RuntimeError: boom" in record["exception"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", access.pop("time"))
    assert access == {
        "level": "info",
        "logger": "ipintel.access",
        "message": "request",
        "request_id": "req-1",
        "method": "GET",
        "route": "/ip/{ip}",
        "status": 200,
        "duration_ms": 1.5,
        "client": "192.0.2.7",
    }


def test_text_lines_are_for_people() -> None:
    _, output = _log_some("text", "tty")
    lines = output.splitlines()
    assert re.fullmatch(r"\d\d:\d\d:\d\d ERROR   ipintel\.test: something failed  \[feed=tor\]", lines[0])
    assert lines[1] == "Traceback (most recent call last):"
    assert "RuntimeError: boom" in lines
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d INFO    ipintel\.access: request_id=req-1 method=GET route=/ip/\{ip\} status=200 "
        r"duration_ms=1\.5 client=192\.0\.2\.7",
        lines[-1],
    )


def test_a_stream_that_cannot_say_is_not_a_terminal() -> None:
    class NoTty:
        def write(self, text: str) -> None: ...

    closed = open(os.devnull, "w")
    closed.close()
    assert logs.choose_format("auto", NoTty()) == "json"
    assert logs.choose_format("auto", closed) == "json"
    with pytest.raises(ValueError, match="'text', 'json' or 'auto'"):
        logs.choose_format("xml", sys.stderr)


# As the server starts (ipintel/__main__.py: Settings.from_env(), then logs.configure()), with standard
# error on a terminal or a pipe, and IPINTEL_LOG_FORMAT unset or set.
_STARTUP = (
    "import logging; from ipintel import logs; from ipintel.settings import Settings; "
    "s = Settings.from_env(); logs.configure(s.log_format, s.log_level); "
    "logging.getLogger('ipintel.test').warning('started')"
)


def _start(kind: str, log_format: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPINTEL_")}
    if log_format is not None:
        env["IPINTEL_LOG_FORMAT"] = log_format
    reader, writer = pty.openpty() if kind == "tty" else os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", _STARTUP], cwd=ROOT, env=env, stderr=writer)
        os.close(writer)
        output = _read_all(reader)
        assert proc.wait(timeout=30) == 0, output
    finally:
        os.close(reader)
    return output.strip()


@pytest.mark.parametrize(
    ("kind", "log_format", "expected"),
    [
        ("tty", None, "text"),
        ("pipe", None, "json"),
        ("tty", "auto", "text"),
        ("pipe", "auto", "json"),
        ("tty", "json", "json"),
        ("pipe", "TEXT", "text"),
    ],
)
def test_at_start_standard_error_decides_unless_told(kind: str, log_format: str | None, expected: str) -> None:
    output = _start(kind, log_format)
    if expected == "json":
        assert json.loads(output)["message"] == "started"
    else:
        assert re.fullmatch(r"\d\d:\d\d:\d\d WARNING ipintel\.test: started", output)


def test_a_bad_value_stops_the_server_at_start() -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("IPINTEL_")}, "IPINTEL_LOG_FORMAT": "yaml"}
    proc = subprocess.run(
        [sys.executable, "-m", "ipintel"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ipintel: configuration error: IPINTEL_LOG_FORMAT must be 'text', 'json' or 'auto' "
        "(text on a terminal, else json), not 'yaml'"
    )
