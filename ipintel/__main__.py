"""``python -m ipintel`` / ``ipintel``: serve the API with hypercorn."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

from hypercorn.config import Config

from ipintel import logs
from ipintel.settings import ConfigError, Settings

log = logging.getLogger("ipintel")


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
    # A client silent this long mid-request (a body announced but never sent) loses its connection;
    # without it such a connection is held forever (the keep-alive timer only runs between requests).
    config.read_timeout = 75
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

    from ipintel.app import create_app

    config = hypercorn_config(settings.host, settings.port)
    try:
        app = create_app(settings)
    except ConfigError as exc:  # settings that parse but cannot work, e.g. a DNSBL zone that is no DNS name
        print(f"ipintel: configuration error: {exc}", file=sys.stderr)
        return 2
    log.info("serving on http://%s:%s", settings.host, settings.port)
    asyncio.run(serve_until_signalled(app, config))
    return 0


async def serve_until_signalled(app: Any, config: Config) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully; SIGHUP reloads the databases.

    On SIGTERM hypercorn stops accepting at once (the listening socket is
    closed), lets the requests in flight finish for up to
    ``config.graceful_timeout`` seconds, then runs the lifespan shutdown,
    which closes the upstream sessions. Kubernetes sends SIGTERM after the
    preStop hook, once the endpoints controller has had time to take the pod
    out of the Service, so no new request should arrive by then anyway."""
    from hypercorn.asyncio import serve

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    reloads: set[asyncio.Task[Any]] = set()  # strong references until each reload is done

    def stop(name: str) -> None:
        if not stopping.is_set():
            log.info("%s: draining the requests in flight for up to %g s, then exiting", name, config.graceful_timeout)
            stopping.set()

    def reload() -> None:
        log.info("SIGHUP: reloading the GeoIP databases")
        task = loop.create_task(app.state.db_watcher.reload_all())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)
    loop.add_signal_handler(signal.SIGHUP, reload)
    await serve(app, config, shutdown_trigger=stopping.wait)
    log.info("stopped")


if __name__ == "__main__":
    raise SystemExit(main())
