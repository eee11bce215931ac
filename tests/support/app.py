"""Running the app in tests: through ASGI (with its lifespan) or as a real
hypercorn process, and validating every response against its route's schema.

Every response a test receives from :func:`running_app` or :func:`server_process`
clients is checked against ``schemas/`` by :func:`validate_response`, so no
test can forget to.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator, FormatChecker
from starlette.applications import Starlette
from starlette.routing import Match

from ipintel.app import ENDPOINTS, create_app
from ipintel.schema_files import embeddable_schema
from ipintel.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

# Routes whose schema is not an Endpoint's: operations routes.
_EXTRA_SCHEMAS = {"/healthz": "health", "/readyz": "health"}


@functools.cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(embeddable_schema(name), format_checker=FormatChecker())


def schema_for_path(path: str, method: str = "GET") -> str | None:
    if path in _EXTRA_SCHEMAS:
        return _EXTRA_SCHEMAS[path]
    scope = {"type": "http", "path": path, "method": method}
    for ep in ENDPOINTS:
        match, _ = ep.route().matches(scope)
        if match == Match.FULL:
            return ep.schema
    return None


def validate_body(path: str, status: int, body: Any, method: str = "GET") -> None:
    """Success bodies against the route's schema, failures against the error schema."""
    if status < 400:
        assert isinstance(body, dict) and set(body) == {"data"}, f"{path}: success body is not {{'data': ...}}: {body}"
        name = schema_for_path(path, method)
        if name is not None:
            validator(name).validate(body["data"])
    else:
        validator("error").validate(body)


def validate_response(response: httpx.Response) -> None:
    path = response.request.url.path
    if path.startswith("/mcp") or path in ("/openapi.json", "/metrics") or path.startswith("/docs"):
        return  # other formats: checked by their own tests
    if response.request.method == "HEAD":
        return
    assert response.headers.get("content-type", "").startswith("application/json"), (
        f"{path}: {response.status_code} is not JSON: {response.headers.get('content-type')}"
    )
    assert response.headers.get("x-request-id"), f"{path}: no X-Request-Id"
    validate_body(path, response.status_code, json.loads(response.content), response.request.method)


async def _ahook(response: httpx.Response) -> None:
    await response.aread()
    validate_response(response)


def _hook(response: httpx.Response) -> None:
    response.read()
    validate_response(response)


class AppClient(httpx.AsyncClient):
    """An httpx client of the ASGI app, which it keeps as :attr:`app` (``client.app.state.intel``)."""

    app: Starlette


@contextlib.asynccontextmanager
async def running_app(
    settings: Settings, *, client: tuple[str, int] = ("203.0.113.7", 40000), **kwargs: Any
) -> AsyncIterator[AppClient]:
    """The ASGI app with its lifespan run, and an httpx client talking to it.

    ``client`` is the socket peer the app sees (default: a documentation
    address, as a remote caller would be)."""
    app = create_app(settings, **kwargs)
    transport = httpx.ASGITransport(app=app, client=client)
    async with app.router.lifespan_context(app):
        async with AppClient(
            transport=transport, base_url="http://ipintel.test", event_hooks={"response": [_ahook]}
        ) as http:
            http.app = app
            yield http


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings_env(settings_vars: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPINTEL_")}
    env.update(settings_vars)
    env.setdefault("IPINTEL_LOG_FORMAT", "json")
    return env


class _Drained:
    """The output of a process, read continuously in the background."""

    def __init__(self, pipe: Any) -> None:
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._pump, args=(pipe,), daemon=True)
        self._thread.start()

    def _pump(self, pipe: Any) -> None:
        with pipe:  # closed at the end of output: an unclosed pipe is a ResourceWarning, and warnings are errors
            for chunk in iter(lambda: pipe.read1(65536), b""):
                self._chunks.append(chunk)

    def read(self) -> bytes:
        """Everything the process wrote; waits for its end of output."""
        self._thread.join(timeout=30)
        return b"".join(self._chunks)


@contextlib.contextmanager
def server_process(
    env_vars: dict[str, str], *, ready_path: str = "/healthz", timeout: float = 20.0, module: str = "ipintel"
) -> Iterator[tuple[httpx.Client, subprocess.Popen]]:
    """Start ``python -m ipintel`` (hypercorn) on a free port; yield a client and the process. ``module``:
    another entry point that runs it (``tests.support.busy_loop``: under a CPU-bound load)."""
    port = free_port()
    env = settings_env({**env_vars, "IPINTEL_HOST": "127.0.0.1", "IPINTEL_PORT": str(port)})
    proc = subprocess.Popen(
        [sys.executable, "-m", module], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    # A reader thread empties the pipe as the server writes, or the server
    # would block once ~64 KB of logs filled it; ``proc.stdout.read()`` then
    # returns everything written, once the process has exited.
    proc.stdout = _Drained(proc.stdout)  # type: ignore[assignment]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"server exited with {proc.returncode}:\n{out}")
            try:
                if httpx.get(base + ready_path, timeout=0.5).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start in time")
            time.sleep(0.1)
        with httpx.Client(base_url=base, event_hooks={"response": [_hook]}, timeout=30) as client:
            yield client, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` every 50 ms until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def sigterm_with_a_request_in_flight(
    client: httpx.Client, proc: subprocess.Popen[bytes], path: str, reached: Callable[[], bool]
) -> httpx.Response:
    """Send ``proc`` SIGTERM while a GET of ``path`` is under way (``reached``: its upstream has been asked),
    and check the drain: new connections are refused at once, the process waits for the request, which
    is answered, and it then exits 0. Returns that answer."""
    port = client.base_url.port
    assert port is not None
    result: dict[str, httpx.Response] = {}
    request = threading.Thread(target=lambda: result.update(answer=client.get(path)))
    request.start()
    assert wait_for(reached), "the request never reached the upstream"
    proc.send_signal(signal.SIGTERM)

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return True
        return False

    assert wait_for(refused, timeout=1.0), "new connections are refused once SIGTERM arrived"
    assert proc.poll() is None, "the server waits for the request in flight"
    request.join(timeout=15)
    assert proc.wait(timeout=15) == 0
    return result["answer"]
