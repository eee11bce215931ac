"""``python -m ipintel`` / ``ipintel``: serve the API with hypercorn."""

from __future__ import annotations

import asyncio
import logging
import sys

from hypercorn.config import Config

from ipintel import logs
from ipintel.settings import ConfigError, Settings


def hypercorn_config(host: str, port: int) -> Config:
    """The server settings, shared with the benchmarks so that their bare
    baseline runs on exactly the same hypercorn configuration."""
    config = Config()
    bind_host = f"[{host}]" if ":" in host else host
    config.bind = [f"{bind_host}:{port}"]
    config.accesslog = None  # our middleware writes the access log
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 20.0
    config.keep_alive_timeout = 75.0  # above common load balancers' idle timeouts
    config.h11_max_incomplete_size = 16 * 1024  # request line and headers
    config.max_app_queue_size = 10
    return config


def main(argv: list[str] | None = None) -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"ipintel: configuration error: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)

    from hypercorn.asyncio import serve

    from ipintel.app import create_app

    config = hypercorn_config(settings.host, settings.port)
    try:
        app = create_app(settings)
    except ConfigError as exc:  # settings that parse but cannot work, e.g. a DNSBL zone that is no DNS name
        print(f"ipintel: configuration error: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("ipintel").info("serving on http://%s:%s", settings.host, settings.port)
    asyncio.run(serve(app, config))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
