"""A real Redis server for the tests (and the soak run): Debian's ``redis-server``, started on 127.0.0.1 on a
free port, with no persistence, and stopped, killed, frozen or restarted (on the same port) on command.

No fake: the shared state (ipintel/infra/shared.py) is tested against the real protocol, Lua scripting and
``TIME`` included. Tests call :func:`require_redis` first: without ``redis-server`` they are skipped with the
install command, except under ``CI=true`` (.ci/run installs it), where its absence is a failure, so that
CI cannot pass without running them. ``IPINTEL_TEST_REDIS_SERVER`` names another binary (Valkey's
``valkey-server`` speaks the same protocol).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.ci import missing

MISSING = (
    "redis-server is not installed, so the shared-state tests are skipped: apt-get install redis-server "
    "(Debian's package; .ci/run installs it, and CI runs these tests)"
)


def redis_server_path() -> str | None:
    override = os.environ.get("IPINTEL_TEST_REDIS_SERVER")
    for candidate in (override,) if override else ("redis-server", "valkey-server"):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def require_redis() -> str:
    """redis-server's path; else skip the test (fail it under CI=true, where .ci/run installed it)."""
    path = redis_server_path()
    if path is None:
        missing(MISSING)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1; :attr:`url` is what ``IPINTEL_REDIS_URL`` takes."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or require_redis()
        self.port = _free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="ipintel-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start (or restart, on the same port) and wait until it answers PING."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        log = Path(self._dir.name) / "redis.log"
        self.proc = subprocess.Popen(
            [
                self.binary,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
                *("--dir", self._dir.name, "--logfile", str(log), "--protected-mode", "yes"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None:
                text = log.read_text(errors="replace") if log.exists() else ""
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{text[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer in time")
            time.sleep(0.05)
        return self

    def answers(self) -> bool:
        """Whether the server answers PING now (a raw RESP exchange: no client library needed)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """One command, its raw RESP reply (for assertions on what the service stored)."""
        payload = f"*{len(args)}\r\n".encode() + b"".join(
            f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in args
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as conn:
            conn.sendall(payload)
            time.sleep(0.05)
            return conn.recv(1 << 20)

    def keys(self, pattern: str = "*") -> list[str]:
        reply = self.command("KEYS", pattern).decode()
        lines = reply.split("\r\n")
        return [line for line in lines[1:] if line and not line.startswith(("$", "*"))]

    def flush(self) -> None:
        assert self.command("FLUSHALL").startswith(b"+OK")

    def kill(self) -> None:
        """SIGKILL: Redis is gone at once, connections reset."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP: Redis accepts connections (the kernel does) but never answers: the slow case."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a frozen server cannot handle SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
