"""Operations routes (docs/API.md#operations): liveness, readiness, the OpenAPI document and its docs page."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ipintel.encoding import dumps
from ipintel.errors import ApiError
from ipintel.web.responses import data_body, json_response

_ALIVE = {"status": "ok"}


async def healthz(request: Request) -> Response:
    return json_response(data_body(_ALIVE))


async def readyz(request: Request) -> Response:
    intel = request.app.state.intel
    checks = intel.readiness()
    if intel.ready:
        return json_response(data_body({"status": "ok", "checks": checks}))
    failing = ", ".join(f"{name}: {c.get('error') or c['status']}" for name, c in checks.items() if c["status"] != "ok")
    raise ApiError("geoip_unavailable", f"not ready: {failing or 'no GeoIP database is loaded'}")


async def openapi(request: Request) -> Response:
    return json_response(dumps(request.app.state.openapi))


_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ipintel API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/docs/init.js"></script>
</body></html>"""

# Kept out of the HTML so that the page works under a strict Content-Security-Policy.
# persistAuthorization false: a key typed into Authorize lives in the tab's memory only, never localStorage.
_DOCS_INIT = """window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: "StandaloneLayout",
  persistAuthorization: false});"""


# /docs (issue 23, point 11): only its own scripts (no inline script, no other host), requests to this origin
# only, no frame (clickjacking of the Authorize box), no referrer. Swagger UI sets inline styles and data: images.
DOCS_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


async def docs(request: Request) -> Response:
    return HTMLResponse(_DOCS_PAGE, headers=DOCS_SECURITY_HEADERS)


async def docs_init(request: Request) -> Response:
    return Response(_DOCS_INIT, media_type="application/javascript", headers=DOCS_SECURITY_HEADERS)


def swagger_ui_assets() -> Path:
    """Swagger UI 5's files, as the ``swagger-ui-py`` package ships them (OpenAPI 3.1 needs Swagger UI 5;
    ``swagger-ui-bundle`` stopped at 4.15). Found without importing the package, whose ``__init__`` loads
    jinja2 and its framework adapters, none of which /docs uses."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package (Swagger UI's assets for /docs) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Route("/docs/init.js", docs_init, methods=["GET"]),
        Mount("/docs/assets", StaticFiles(directory=swagger_ui_assets()), name="docs-assets"),
    ]
