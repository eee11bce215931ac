"""Headless Chromium in real time, for the tests that measure how long something takes in the browser.

:func:`tests.support.browser.render` runs pages under a virtual-time budget, in which the clock does not
move while a script runs, so a duration measured there is not a duration. :func:`live` instead drives
the same Chromium binary, with the same flags (no other host reachable), over the DevTools protocol
(a WebSocket from aiohttp, no driver library): it opens the URL, polls a JavaScript expression until it
is true, then returns the DOM, every URL the page asked for (from the net log) and on request a PNG
screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.browser import FLAGS, BrowserError, page_requests, require_chromium


@dataclass(frozen=True)
class Live:
    url: str
    dom: str
    requests: tuple[str, ...]
    screenshot: Path | None
    ready: bool  # whether ``until`` became true before the timeout


def live(
    url: str,
    *,
    until: str,
    timeout: float = 60.0,
    window: tuple[int, int] = (1280, 1600),
    screenshot: Path | None = None,
) -> Live:
    """Open ``url`` and wait (in real time, at most ``timeout`` s) until the expression ``until`` is true."""
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="ipintel-chromium-live-") as tmp:
        netlog = Path(tmp) / "netlog.json"
        args = [
            binary,
            *FLAGS,
            f"--user-data-dir={tmp}/profile",
            f"--window-size={window[0]},{window[1]}",
            f"--log-net-log={netlog}",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        proc = subprocess.Popen(
            args,
            # Nothing reads Chromium's output: a pipe would fill and stall it, and left unclosed it is a
            # ResourceWarning (an error here).
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "HOME": tmp},
        )
        try:
            dom, ready, png = asyncio.run(_drive(Path(tmp) / "profile", url, until, timeout, screenshot is not None))
            if screenshot is not None and png is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(png)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return Live(url, dom, tuple(page_requests(netlog)), screenshot, ready)


async def _drive(profile: Path, url: str, until: str, timeout: float, shoot: bool) -> tuple[str, bool, bytes | None]:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
        if time.monotonic() > deadline:
            raise BrowserError("Chromium did not open its DevTools port within 30 s")
        await asyncio.sleep(0.05)
    port = port_file.read_text().splitlines()[0]
    ids = itertools.count(1)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        page = next(t for t in targets if t.get("type") == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:

            async def call(method: str, **params: Any) -> dict[str, Any]:
                id_ = next(ids)
                await ws.send_str(json.dumps({"id": id_, "method": method, "params": params}))
                async for message in ws:
                    answer = json.loads(message.data)
                    if answer.get("id") == id_:
                        if "error" in answer:
                            raise BrowserError(f"{method}: {answer['error']}")
                        return answer["result"]
                raise BrowserError("the DevTools connection closed")

            async def evaluate(expression: str) -> Any:
                result = await call("Runtime.evaluate", expression=expression, returnByValue=True)
                return result.get("result", {}).get("value")

            await call("Page.navigate", url=url)
            ready = False
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if await evaluate(f"Boolean({until})"):
                    ready = True
                    break
                await asyncio.sleep(0.1)
            dom = await evaluate("document.documentElement.outerHTML") or ""
            png = None
            if shoot:
                shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
                png = base64.b64decode(shot["data"])
            with contextlib.suppress(Exception):
                await call("Browser.close")
    return dom, ready, png
