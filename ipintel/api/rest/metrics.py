"""``GET /metrics``: the app's Prometheus registry in the text format (docs/API.md#operations).

Not rate limited (no rule names it) and never cached (``Cache-Control:
no-store``): a scraper must see the numbers of this moment. A scraper that
asks for OpenMetrics (``Accept: application/openmetrics-text``) gets it.
"""

from __future__ import annotations

from prometheus_client.exposition import choose_encoder
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route


async def metrics(request: Request) -> Response:
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    body = encoder(request.app.state.metrics.registry)
    return Response(body, headers={"Content-Type": content_type, "Cache-Control": "no-store"})


def routes() -> list[BaseRoute]:
    return [Route("/metrics", metrics, methods=["GET"])]
