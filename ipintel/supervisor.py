"""Several serving processes on one port (``IPINTEL_WORKERS`` > 1): a supervisor that serves nothing itself,
and N workers (``python -m ipintel --worker I --listen-fd FD``), each on its own socket. Python runs one request
at a time per process, so one process uses at most one core. The workers share nothing: caches, rate-limit
buckets and ``/metrics`` are per worker (docs/DEPLOYMENT.md#scaling-one-process-one-machine-a-fleet), which is
why several workers with rate limits on need ``IPINTEL_REDIS_URL`` (:func:`ipintel.settings.check_workers`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence

log = logging.getLogger("ipintel.supervisor")

# A worker exiting with CONFIG_ERROR, or dying more than MAX_RESTARTS times within RESTART_WINDOW seconds, makes the
# supervisor stop the others and exit 1: the service manager (Kubernetes, systemd, docker's restart policy) then
# sees the failure, instead of a crash loop hidden inside a running process.
MAX_RESTARTS = 5  # deaths of one worker within RESTART_WINDOW seconds before the supervisor gives up
RESTART_WINDOW = 60.0
RESTART_DELAY = 1.0  # seconds between a worker's death and its restart
KILL_MARGIN = 10.0  # seconds past the graceful timeout before a draining worker is killed
CONFIG_ERROR = 2  # the exit status of a configuration error (docs/CONFIGURATION.md)
# The exit statuses of a worker that ended because it was told to stop (it may have been
# signalled before it installed its own handlers, during its imports).
_STOPPED = frozenset({0, -signal.SIGTERM, -signal.SIGINT})


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` TCP sockets bound to ``host``:``port`` with ``SO_REUSEPORT`` (not yet listening: each
    worker calls ``listen`` on its own). Port 0 picks a free port, the same for all of them. The
    options are hypercorn's own for a bound socket (``Config._create_sockets``).

    Bound before any worker starts, so that a port in use is reported once, at once. One socket per worker: the
    kernel spreads new connections over them by a hash of their addresses, evenly, where one shared socket would
    let whichever worker woke first accept a whole burst (asyncio accepts up to its backlog per wake-up)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port != 0:
        # SO_REUSEPORT would let us bind beside another process of the same user already listening on the port
        # (with SO_REUSEPORT too) and share its connections, silently (issue 23, point 8). A socket without it
        # cannot be bound while anything listens there: the port in use is reported at once, as promised.
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past connections in TIME_WAIT are fine
            probe.bind((host, port))
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def worker_command(index: int, fd: int) -> list[str]:
    """The command line of worker ``index`` serving the socket ``fd``; its settings come from the
    environment it inherits, as the supervisor's did."""
    return [sys.executable, "-m", "ipintel", "--worker", str(index), "--listen-fd", str(fd)]


class Supervisor:
    """Runs one worker per socket until told to stop (:meth:`run`)."""

    def __init__(
        self,
        sockets: Sequence[socket.socket],
        *,
        graceful_timeout: float,
        command: Callable[[int, int], list[str]] = worker_command,
    ) -> None:
        self.sockets = list(sockets)
        self.graceful_timeout = graceful_timeout
        self.command = command
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.clean = True  # every worker ended as told; False: the exit status is 1
        self._stopping = asyncio.Event()
        self._kill_timer: asyncio.TimerHandle | None = None

    async def run(self) -> int:
        """Start the workers and keep them running; the exit status once they have all ended."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, sig.name)
        loop.add_signal_handler(signal.SIGHUP, self.forward, signal.SIGHUP)
        try:
            await asyncio.gather(*(self._keep(index) for index in range(1, len(self.sockets) + 1)))
        finally:
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self._close_sockets()
        log.info("all workers stopped")
        return 0 if self.clean else 1

    def stop(self, reason: str) -> None:
        # SIGTERM to every worker: each drains its requests in flight as a single process does; the supervisor
        # exits once all have (0 if every one ended cleanly), killing any still running KILL_MARGIN past the
        # graceful timeout.
        """Stop every worker (each drains its requests in flight); idempotent."""
        if self._stopping.is_set():
            return
        log.info(
            "%s: stopping the %d workers (each drains for up to %g s)", reason, len(self.procs), self.graceful_timeout
        )
        self._stopping.set()
        # The workers' copies are then the last: once each worker closes its own, as it starts to
        # drain, new connections are refused rather than queued for no one.
        self._close_sockets()
        self.forward(signal.SIGTERM)
        self._kill_timer = asyncio.get_running_loop().call_later(self.graceful_timeout + KILL_MARGIN, self._kill)

    def forward(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            log.info("SIGHUP: sending it on to the %d workers", len(self.procs))
        for proc in list(self.procs.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    def _kill(self) -> None:
        for index, proc in list(self.procs.items()):
            log.error(
                "worker %d (pid %d) still running %g s after SIGTERM: killed",
                index,
                proc.pid,
                self.graceful_timeout + KILL_MARGIN,
            )
            self.clean = False
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def _close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()

    async def _keep(self, index: int) -> None:
        """Run worker ``index``, restarting it when it dies, until the supervisor stops. A restarted worker serves
        the same socket: connections that arrived meanwhile wait in its queue, as the supervisor holds it open."""
        sock = self.sockets[index - 1]
        fd = sock.fileno()
        deaths: collections.deque[float] = collections.deque()
        while not self._stopping.is_set():
            # The worker starts with SIGHUP blocked (a signal mask survives fork and exec) and unblocks it
            # once its handler is in place: a SIGHUP sent on during its start would otherwise kill it
            # (the default action), while blocked it waits and then reloads, as asked.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
            try:
                proc = await asyncio.create_subprocess_exec(*self.command(index, fd), pass_fds=(fd,))
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
            self.procs[index] = proc
            if self._stopping.is_set():  # the stop came while this one was starting: it missed the SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            code = await proc.wait()
            del self.procs[index]
            if self._stopping.is_set():
                if code not in _STOPPED:
                    log.error("worker %d (pid %d) exited with status %d while stopping", index, proc.pid, code)
                    self.clean = False
                return
            now = time.monotonic()
            deaths.append(now)
            while deaths and deaths[0] < now - RESTART_WINDOW:
                deaths.popleft()
            if code == CONFIG_ERROR or len(deaths) > MAX_RESTARTS:
                why = (
                    "a configuration error" if code == CONFIG_ERROR else f"{len(deaths)} deaths in {RESTART_WINDOW:g} s"
                )
                log.error("worker %d (pid %d) exited with status %d: %s, giving up", index, proc.pid, code, why)
                self.clean = False
                self.stop("worker failure")
                return
            log.error(
                "worker %d (pid %d) exited with status %d: restarting it in %g s", index, proc.pid, code, RESTART_DELAY
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), RESTART_DELAY)


def supervise(host: str, port: int, workers: int, graceful_timeout: float) -> int:
    """Bind, run ``workers`` workers until SIGTERM or SIGINT; the process's exit status."""
    try:
        sockets = listening_sockets(host, port, workers)
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", host, port, exc)
        return 1
    bound = sockets[0].getsockname()[1]
    log.info("supervisor (pid %d): %d workers serving on http://%s:%s", os.getpid(), workers, host, bound)
    return asyncio.run(Supervisor(sockets, graceful_timeout=graceful_timeout).run())
