"""A test host for the MCP Apps card (tests/test_mcp_app_browser.py): a web page that embeds the card the way a
web host does, with the extension's own host half (``AppBridge`` from the npm package
``@modelcontextprotocol/ext-apps``), served from 127.0.0.1 for headless Chromium.

:class:`AppHost` serves three things on one port:

- ``/host.html`` and ``/host.mjs``, the host (origin ``http://127.0.0.1:<port>``): it asks the real ipintel
  server for ``tools/list`` (declaring the extension), reads the resource the tool links, embeds the sandbox proxy,
  connects an ``AppBridge`` to it, calls the tool on the server and delivers the input and the result;
- ``/sandbox.html``, the sandbox proxy the extension requires of a web host, loaded from
  ``http://localhost:<port>`` so that its origin differs from the host's: it loads the card's HTML into an inner
  iframe under the content security policy built from the resource's ``_meta.ui.csp``, passes messages both ways,
  and (the test's eyes, since ``--dump-dom`` shows only the top document) reports the card's DOM to the host;
- ``/node_modules/...``: the npm packages' ES modules, with an import map that resolves their bare specifiers
  (computed from the packages' ``exports``, following every import from ``app-bridge``), so that the browser runs
  the published SDK unbundled.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.mcp_interop import NODE_MODULES

HERE = Path(__file__).resolve().parent / "mcp_app_host"
ENTRY = "@modelcontextprotocol/ext-apps/app-bridge"
_IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']""")
_CONDITIONS = ("browser", "import", "default")


def _split(spec: str) -> tuple[str, str]:
    parts = spec.split("/")
    size = 2 if spec.startswith("@") else 1
    return "/".join(parts[:size]), "./" + "/".join(parts[size:]) if len(parts) > size else "."


def _pick(target: Any) -> str | None:
    if isinstance(target, str):
        return target
    if isinstance(target, dict):
        for condition in _CONDITIONS:
            if condition in target:
                found = _pick(target[condition])
                if found:
                    return found
    return None


def resolve(spec: str) -> Path:
    """The file a bare specifier names, by its package's ``exports`` (browser, import, default)."""
    name, subpath = _split(spec)
    root = NODE_MODULES / name
    manifest = json.loads((root / "package.json").read_text())
    exports = manifest.get("exports")
    if isinstance(exports, str | list) or (isinstance(exports, dict) and not any(k.startswith(".") for k in exports)):
        exports = {".": exports}
    target = _pick(exports.get(subpath)) if isinstance(exports, dict) else None
    if target is None and subpath == ".":
        target = manifest.get("module") or manifest.get("main") or "index.js"
    if target is None:
        raise LookupError(f"{spec}: no export {subpath} in {name}")
    return (root / target).resolve()


def import_map(entry: str = ENTRY) -> dict[str, str]:
    """Every bare specifier reachable from ``entry``, mapped to its URL under /node_modules/."""
    mapping: dict[str, str] = {}
    seen: set[Path] = set()
    mapping[entry] = "/node_modules/" + resolve(entry).relative_to(NODE_MODULES.resolve()).as_posix()
    files = [resolve(entry)]
    while files:
        path = files.pop()
        if path in seen:
            continue
        seen.add(path)
        for spec in _IMPORT.findall(path.read_text(errors="replace")):
            if spec.startswith(("./", "../")):
                files.append((path.parent / spec).resolve())
            elif not spec.startswith(("/", "node:", "http")) and spec not in mapping:
                target = resolve(spec)
                mapping[spec] = "/node_modules/" + target.relative_to(NODE_MODULES.resolve()).as_posix()
                files.append(target)
    return mapping


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/host.html":
            page = (HERE / "host.html").read_text().replace("IMPORT_MAP", json.dumps({"imports": self.server.imports}))
            return self._send(page.encode(), "text/html; charset=utf-8")
        if path in ("/host.mjs", "/sandbox.html"):
            media = "text/javascript" if path.endswith(".mjs") else "text/html; charset=utf-8"
            return self._send((HERE / path[1:]).read_bytes(), media)
        if path.startswith("/node_modules/"):
            target = (NODE_MODULES / path[len("/node_modules/") :]).resolve()
            if target.is_relative_to(NODE_MODULES.resolve()) and target.suffix in (".js", ".mjs") and target.is_file():
                return self._send(target.read_bytes(), "text/javascript")
        self.send_error(404)

    def _send(self, body: bytes, media: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    imports: dict[str, str]


@contextlib.contextmanager
def app_host() -> Iterator[str]:
    """Serve the test host; yields its base URL (``http://127.0.0.1:<port>``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.imports = import_map()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
