"""The baseline: a bare Starlette handler on exactly ipintel's hypercorn settings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypercorn.asyncio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ipintel.__main__ import hypercorn_config, run

# With BARE_API_HEADERS=1 the handler also sends the five headers ipintel puts on
# every rate-limited answer (X-Request-Id and the RateLimit-* set, docs/API.md), so the
# report can show what those headers alone cost in hypercorn and h11.
API_HEADERS = {
    "x-request-id": "0123456789abcdef",
    "ratelimit-limit": "60",
    "ratelimit-remaining": "59",
    "ratelimit-reset": "1",
    "ratelimit-policy": "60;w=60",
}
HEADERS = API_HEADERS if os.environ.get("BARE_API_HEADERS") == "1" else None


async def handler(request: Request) -> JSONResponse:
    return JSONResponse({"data": {"ip": request.path_params.get("ip"), "ok": True}}, headers=HEADERS)


app = Starlette(routes=[Route("/ip/{ip}", handler), Route("/cidr", handler)])

if __name__ == "__main__":
    config = hypercorn_config("127.0.0.1", int(os.environ["IPINTEL_PORT"]))
    run(serve(app, config), config)  # type: ignore[arg-type]  # on ipintel's event loop (worker_class) too
