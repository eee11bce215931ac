"""A real browser for the tests: Debian's Chromium, headless, driven from the command line.

:func:`render` loads a URL, lets its scripts run, and returns the DOM as the page's
scripts left it, every URL the page asked for (from Chromium's own network log),
and on request a PNG screenshot. :func:`parse` indexes that DOM for assertions.

No driver library: one ``chromium --headless --dump-dom --virtual-time-budget``
process per page. Virtual time only advances while the page is idle (no script
running, no fetch pending), so a slow, shared machine makes the run take longer in
real time but does not cut the page's work short; the real-time timeout is a bound
on a stuck browser, not the wait for the page. A page that is not ``ready`` yet is
loaded again with a larger budget.

Chromium never reaches another host: every name but 127.0.0.1 and localhost
resolves to nothing (``--host-resolver-rules``), which also hides the browser's own
background calls (updates, accounts).

Tests call :func:`require_chromium` first: without Chromium they are skipped with
the install command, except under ``CI=true`` (.ci/run installs Chromium), where
its absence is a failure, so that CI cannot pass without running them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from tests.support.ci import missing

# Where Debian's package puts it, then whatever is on PATH. IPINTEL_TEST_CHROMIUM names another binary.
_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")

MISSING = (
    "Chromium is not installed, so the browser tests are skipped: apt-get install chromium "
    "(Debian's package; .ci/run installs it, and CI runs these tests)"
)

# Root in a container: no sandbox, no GPU, no QUIC, nothing the browser does for itself in the background.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
)


def chromium_path() -> str | None:
    """The Chromium binary, or None."""
    override = os.environ.get("IPINTEL_TEST_CHROMIUM")
    for candidate in (override,) if override else _CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def require_chromium() -> str:
    """Chromium's path; else skip the test (fail it under CI=true, where .ci/run installed Chromium)."""
    path = chromium_path()
    if path is None:
        missing(MISSING)
    return path


@dataclass(frozen=True)
class Rendered:
    url: str
    dom: str  # document.documentElement.outerHTML once the page's scripts settled
    requests: tuple[str, ...]  # every URL the page (not the browser itself) asked for, in order
    screenshot: Path | None
    budget_ms: int  # the virtual-time budget that made the page ready
    log: str  # Chromium's stderr, for failure messages


class BrowserError(RuntimeError):
    pass


def render(
    url: str,
    *,
    ready: Callable[[str], bool] | None = None,
    screenshot: Path | None = None,
    window: tuple[int, int] = (1280, 2000),
    budgets_ms: Iterable[int] = (10_000, 30_000, 90_000),
    timeout: float = 120.0,
) -> Rendered:
    """Load ``url`` in headless Chromium and return what it rendered.

    ``ready(dom)`` says when the page is done (default: any DOM). Each budget of
    virtual time is tried in turn until ``ready`` holds; the last attempt is returned
    either way, for the test's assertions to explain. ``timeout`` bounds each
    Chromium run in real seconds. ``screenshot`` saves a PNG of the ``window``-sized
    viewport."""
    binary = require_chromium()
    attempt: Rendered | None = None
    for budget in budgets_ms:
        attempt = _run(binary, url, budget, screenshot, window, timeout)
        if ready is None or ready(attempt.dom):
            break
    assert attempt is not None, "no virtual-time budget given"
    return attempt


def _run(
    binary: str, url: str, budget: int, screenshot: Path | None, window: tuple[int, int], timeout: float
) -> Rendered:
    with tempfile.TemporaryDirectory(prefix="ipintel-chromium-") as tmp:
        netlog = Path(tmp) / "netlog.json"
        args = [
            binary,
            *FLAGS,
            f"--user-data-dir={tmp}/profile",
            f"--window-size={window[0]},{window[1]}",
            f"--virtual-time-budget={budget}",
            f"--log-net-log={netlog}",
            "--dump-dom",
        ]
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            args.append(f"--screenshot={screenshot}")
        # Its own session, so that a stuck browser is ended with all its helper processes.
        proc = subprocess.Popen(
            [*args, url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "HOME": tmp},
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise BrowserError(
                f"Chromium did not finish {url} within {timeout:.0f} s (budget {budget} ms):\n{_tail(err)}"
            ) from None
        finally:
            # Helpers that outlived the browser (rare) go with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        log = err.decode(errors="replace")
        if proc.returncode != 0 or not out.strip():
            raise BrowserError(f"Chromium exited with {proc.returncode} on {url}:\n{_tail(err)}")
        return Rendered(
            url=url,
            dom=out.decode(errors="replace"),
            requests=tuple(page_requests(netlog)),
            screenshot=screenshot,
            budget_ms=budget,
            log=log,
        )


def _tail(err: bytes, lines: int = 30) -> str:
    kept = [line for line in err.decode(errors="replace").splitlines() if "dbus" not in line]
    return "\n".join(kept[-lines:])


def page_requests(netlog: Path) -> list[str]:
    """The URLs the page requested, from a Chromium net log: the main document and every request with an
    initiating origin. The browser's own calls (``initiator: not an origin``) are left out."""
    try:
        text = netlog.read_text(errors="replace")
    except FileNotFoundError:
        return []
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # cut short: close the events list
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls: list[str] = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") != start or "url" not in params:
            continue
        if params.get("request_type") == "main frame" or params.get("initiator", "not an origin") != "not an origin":
            if params["url"] not in urls:
                urls.append(params["url"])
    return urls


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, parts.hostname or "", port


def foreign(urls: Iterable[str], base: str) -> list[str]:
    """The URLs (resolved against ``base``) that another origin would serve; data: and blob: load nothing."""
    home = origin(base)
    out = []
    for url in urls:
        absolute = urljoin(base, url.strip())
        if urlsplit(absolute).scheme in ("data", "blob", "about"):
            continue
        if origin(absolute) != home:
            out.append(absolute)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The rendered DOM, indexed.

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Attributes through which an element loads something (an <a href> only links).
_LOADING = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "input": ("src",),
    "image": ("href", "xlink:href"),
    "use": ("href", "xlink:href"),
}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Dom(HTMLParser):
    """Every element of a document with its attributes and its text (its descendants' included)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in _VOID:
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.parts.append(data)

    def by_class(self, name: str) -> list[Element]:
        return [e for e in self.elements if name in e.classes]

    def loaded_urls(self) -> list[str]:
        """Every URL an element of the page loads (scripts, stylesheets, images, frames...)."""
        urls: list[str] = []
        for element in self.elements:
            for attr in _LOADING.get(element.tag, ()):
                value = element.attrs.get(attr, "").strip()
                if not value:
                    continue
                if attr == "srcset":
                    urls.extend(item.split()[0] for item in value.split(",") if item.strip())
                else:
                    urls.append(value)
        return urls


def parse(html: str) -> Dom:
    return Dom(html)
