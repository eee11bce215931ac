"""``python -m ipintel`` / ``ipintel``: serve the API with hypercorn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Coroutine
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
    # The event loop run() starts. hypercorn's "uvloop" class was measured against it side by side on one CPU
    # (bench/bench_workers.py): 1.06-1.07x while other work loaded the machine, 0.98-1.03x on a quiet one. No
    # clear gain, so not adopted; run() still takes either (docs/DEPLOYMENT.md#scaling-one-process-one-machine-a-fleet).
    config.worker_class = "asyncio"
    return config


def main(argv: list[str] | None = None, *, worker_class: str | None = None) -> int:
    """Serve until SIGTERM; the exit status. With ``IPINTEL_WORKERS`` > 1 this process becomes the
    supervisor of that many serving processes (ipintel/supervisor.py), each of which runs this again
    with ``--worker INDEX --listen-fd FD``. ``worker_class`` (``asyncio`` or ``uvloop``) replaces the one of
    :func:`hypercorn_config`: the benchmarks compare the two."""
    args = sys.argv[1:] if argv is None else argv
    try:
        settings = Settings.from_env()
        worker = _worker_arguments(args)
    except ConfigError as exc:
        print(f"ipintel: configuration error: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)

    from ipintel.app import create_app

    config = hypercorn_config(settings.host, settings.port)
    if worker_class is not None:
        config.worker_class = worker_class
    try:
        app = create_app(settings)
    except ConfigError as exc:  # settings that parse but cannot work, e.g. a DNSBL zone that is no DNS name
        print(f"ipintel: configuration error: {exc}", file=sys.stderr)
        return 2
    # A .mmdb file that is there but cannot serve (corrupt, or none of the fields its kind needs) stops the
    # start: it would answer null fields while /readyz said ok (docs/CONFIGURATION.md#geoip-databases).
    supervisor = worker is None and settings.workers > 1  # checks the files; its workers serve them
    refusals = app.state.intel.open_databases(index=False)  # the index is built once serving (Intel.start)
    if refusals:
        for refusal in refusals:
            print(f"ipintel: refused {refusal}", file=sys.stderr)
        return 2
    if supervisor:
        app.state.intel.databases.close()
        del app  # only built to find a configuration error (or a refused database) before any worker starts
        from ipintel.supervisor import supervise

        return supervise(settings.host, settings.port, settings.workers, config.graceful_timeout)
    parent = None
    if worker is not None:
        index, fd = worker
        config.bind = [f"fd://{fd}"]  # the socket the supervisor bound (SO_REUSEPORT), inherited
        parent = os.getppid()
        for handler in logging.getLogger().handlers:
            handler.addFilter(_WorkerField(index))
        log.info(
            "worker %d of %d (pid %d) serving on http://%s:%s",
            index,
            settings.workers,
            os.getpid(),
            settings.host,
            settings.port,
        )
    else:
        log.info("serving on http://%s:%s", settings.host, settings.port)
    run(serve_until_signalled(app, config, parent=parent), config)
    return 0


def run(main: Coroutine[Any, Any, None], config: Config) -> None:
    """Run the server's coroutine on the event loop ``config.worker_class`` names, as hypercorn's own
    workers do (``asyncio`` or ``uvloop``; bench/bare_app.py runs the baseline through this too)."""
    if config.worker_class == "uvloop":
        import uvloop

        loop_factory: Any = uvloop.new_event_loop
    elif config.worker_class == "asyncio":
        loop_factory = None
    else:
        raise ValueError(f"no event loop for hypercorn's worker class {config.worker_class!r}")
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main)


def _worker_arguments(args: list[str]) -> tuple[int, int] | None:
    """``--worker INDEX --listen-fd FD`` (from the supervisor, never typed by hand): (index, fd); other
    arguments are ignored, as they always were."""
    if not args or args[0] != "--worker":
        return None
    if len(args) != 4 or args[2] != "--listen-fd" or not args[1].isdigit() or not args[3].isdigit():
        raise ConfigError(f"a worker takes --worker INDEX --listen-fd FD, not {' '.join(args)!r}")
    return int(args[1]), int(args[3])


class _WorkerField(logging.Filter):
    """Adds ``worker`` (the index, 1..N) to every log record of a worker process."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.index
        return True


async def serve_until_signalled(app: Any, config: Config, *, parent: int | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain the requests in flight for up to ``config.graceful_timeout``
    seconds and run the lifespan shutdown (docs/DEPLOYMENT.md#kubernetes--kubectl-apply--k); SIGHUP reloads the
    databases and the API key file. ``parent``: a worker's supervisor, whose end stops the worker too."""
    from hypercorn.asyncio import serve

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    tasks: set[asyncio.Task[Any]] = set()  # strong references until each reload (or the watch) is done

    def stop(name: str) -> None:
        if not stopping.is_set():
            log.info("%s: draining the requests in flight for up to %g s, then exiting", name, config.graceful_timeout)
            stopping.set()

    def reload() -> None:
        log.info("SIGHUP: reloading the GeoIP databases")
        keep(loop.create_task(app.state.db_watcher.reload_all()))
        api_keys = getattr(app.state, "api_keys", None)
        if api_keys is not None:  # IPINTEL_API_KEYS_FILE: re-read the key file too
            log.info("SIGHUP: reloading the API key file")
            keep(loop.create_task(api_keys.reload()))

    def keep(task: asyncio.Task[Any]) -> None:
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    # A supervisor killed outright could not stop its workers: each stops itself once its parent is gone.
    async def watch_parent(pid: int) -> None:
        while os.getppid() == pid:  # a check a second; reparented once the supervisor is gone
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 1.0)
                return
        stop("supervisor gone")

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)
    loop.add_signal_handler(signal.SIGHUP, reload)
    if parent is not None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})  # the supervisor started it blocked
        keep(loop.create_task(watch_parent(parent)))
    await serve(app, config, shutdown_trigger=stopping.wait)
    log.info("stopped")


if __name__ == "__main__":
    raise SystemExit(main())
