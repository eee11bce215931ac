"""``GET /`` (docs/API.md#the-page--get--in-a-browser): the page for people, a view of ``GET /ip/{ip}/profile``
rendered by its own script, or for any other client the JSON index of the routes (negotiated on ``Accept``);
and ``/page/{name}``, which serves the page's files by name and nothing else on disk.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ipintel import __version__
from ipintel.errors import ApiError
from ipintel.web.responses import fresh_data_body, json_response

STATIC = Path(__file__).resolve().parent / "static"

# Only this origin: no inline script or style, no frame, no plug-in, no other host. img-src allows data: for the
# favicon (an empty data: URL, so the browser does not ask for /favicon.ico).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _load(path: Path) -> Asset:
    body = path.read_bytes()
    return Asset(body, _TYPES[path.suffix], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


# The page's files, read once: /page/{name} serves these names and nothing else.
ASSETS: dict[str, Asset] = {p.name: _load(p) for p in sorted(STATIC.iterdir()) if p.suffix in _TYPES}
PAGE = ASSETS.pop("index.html")


def wants_html(accept: str) -> bool:
    """True when ``Accept`` ranks ``text/html`` above zero and at least as high as JSON (``application/json``,
    ``application/*`` or ``*/*``). A browser's navigation does; curl's ``*/*`` and API clients do not."""
    html = json = 0.0
    for item in accept.split(","):
        media, _, params = item.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = max(0.0, min(1.0, float(value)))
                except ValueError:
                    quality = 0.0
        media = media.strip().lower()
        if media in ("text/html", "application/xhtml+xml"):
            html = max(html, quality)
        elif media in ("application/json", "application/*", "*/*"):
            json = max(json, quality)
    return html > 0 and html >= json


def _asset_response(request: Request, asset: Asset, *, extra: dict[str, str] | None = None) -> Response:
    headers = {**SECURITY_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache", **(extra or {})}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


# The footer's date of the GeoIP data (issue 22: freshness you can see), written into the page by the server:
# the City databases' build date (the oldest, with several files), so the page needs no request of its own.
_DATA_DATE = b'<time id="data-date">(no database loaded)</time>'


@functools.lru_cache(maxsize=8)
def dated_page(date: str | None) -> Asset:
    """The page with the data's build date (``YYYY-MM-DD``) in its footer; its own ETag per date."""
    if date is None:
        return PAGE
    body = PAGE.body.replace(_DATA_DATE, f'<time id="data-date" datetime="{date}">{date}</time>'.encode())
    return Asset(body, PAGE.media_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


async def index(request: Request) -> Response:
    if wants_html(request.headers.get("accept", "")):
        epoch = request.app.state.intel.databases.city.build_epoch
        date = time.strftime("%Y-%m-%d", time.gmtime(epoch)) if epoch is not None else None
        return _asset_response(request, dated_page(date), extra={"Vary": "Accept"})
    paths = request.app.state.openapi["paths"]
    routes = [path for path, item in paths.items() if "get" in item]  # in the OpenAPI document's order
    index = {"name": "ipintel", "version": __version__, "docs": "/docs", "openapi": "/openapi.json", "routes": routes}
    return json_response(fresh_data_body(index), headers={"Vary": "Accept"})


async def asset(request: Request) -> Response:
    found = ASSETS.get(request.path_params["name"])
    if found is None:
        raise ApiError("not_found", f"no route {request.url.path}")
    return _asset_response(request, found)


def routes() -> list[BaseRoute]:
    return [
        Route("/", index, methods=["GET"]),
        Route("/page/{name}", asset, methods=["GET"]),
    ]
