"""The baseline: a bare Starlette handler on exactly ipintel's hypercorn settings."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypercorn.asyncio import serve  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from ipintel.__main__ import hypercorn_config  # noqa: E402


async def handler(request: Request) -> JSONResponse:
    return JSONResponse({"data": {"ip": request.path_params.get("ip"), "ok": True}})


app = Starlette(routes=[Route("/ip/{ip}", handler), Route("/cidr", handler)])

if __name__ == "__main__":
    asyncio.run(serve(app, hypercorn_config("127.0.0.1", int(os.environ["IPINTEL_PORT"]))))  # type: ignore[arg-type]
