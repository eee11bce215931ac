"""Reloading the ``.mmdb`` files while the service runs (docs/API.md#operations).

Two triggers, one mechanism (:meth:`MmdbFile.load`, which opens the new file
first and swaps the reader only when that worked, so a request in flight keeps
the reader it started with and a broken file never replaces a good one):

- SIGHUP (``python -m ipintel`` wires it to :meth:`DatabaseWatcher.reload_all`):
  the operator says "reload now".
- A file replaced on disk: a background task compares each file's stat
  (inode, mtime, size) with the one it was opened with every ``interval``
  seconds, by the rule of :class:`~ipintel.infra.file_watch.SettledFile`
  (the API key file's too): a change is acted on only when the new stat has
  held still for one more interval, and a file that failed to open is not
  retried until it changes again. A default file that was not there at start
  (docs/CONFIGURATION.md#geoip-databases) is loaded the same way once it
  appears; a file removed is no change: the one opened stays.

A refused file (corrupt, or none of the fields its kind needs) is a failed
reload: the previous file stays loaded, the refusal is logged and counted.
The same task warns once a day about each file older than its max age
(ipintel/infra/freshness.py), as the start did.

Polling rather than inotify: a stat of four files every few seconds costs
nothing, needs no extra dependency, and works on every volume Kubernetes
mounts (inotify misses the symlink swap of ConfigMap and projected volumes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from ipintel.infra.background import BackgroundTask, poll
from ipintel.infra.mmdb import GeoDatabases, MmdbFile

log = logging.getLogger("ipintel.reload")

_FileKey = tuple[str, str]  # (kind, path): one path may serve two kinds (IPinfo Lite: City and ASN)

STALE_WARNING_INTERVAL = 86_400.0  # a stale file is warned about once a day


def _key(db: MmdbFile) -> _FileKey:
    return (db.kind, str(db.path))


class DatabaseWatcher:
    """Reloads the configured ``.mmdb`` files on demand and when they change on disk.

    ``reloads`` counts attempts by ``(kind, outcome)``, ``outcome`` being
    ``ok`` or ``error``; /metrics exports it."""

    def __init__(
        self, databases: GeoDatabases, *, interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.databases = databases
        self.interval = interval
        self.reloads: Counter[tuple[str, str]] = Counter()
        self._clock = clock
        self._warned: dict[_FileKey, float] = {}  # when each stale file was last warned about
        self._task = BackgroundTask("mmdb-watcher")
        self._lock = asyncio.Lock()  # one reload at a time: SIGHUP and the watcher never race

    def start(self) -> None:
        self._task.start(lambda: poll(self.interval, self.check, "the GeoIP databases", log))

    async def close(self) -> None:
        await self._task.stop()

    async def reload_all(self) -> list[str]:
        """Re-open every configured file now (SIGHUP); the kinds that loaded."""
        async with self._lock:
            dbs = self.databases.all()
            results = await asyncio.to_thread(lambda: [(db, db.load()) for db in dbs])
            for db, ok in results:
                if ok or not db.absent:
                    self._count(db, ok)
                db.on_disk.forget()
        loaded = [db.kind for db, ok in results if ok]
        log.info("reloaded GeoIP databases on request: %s", ", ".join(loaded) or "none")
        return loaded

    async def check(self) -> list[str]:
        """One poll: reload the files whose change has settled; the kinds reloaded."""
        reloaded: list[str] = []
        async with self._lock:
            for db in self.databases.all():
                stat = db.on_disk.settled_change()
                if stat is None:
                    continue
                if not stat.exists:
                    db.on_disk.refused(stat)  # removed: the reader opened stays, until another file is there
                    continue
                ok = await asyncio.to_thread(db.load)  # in force now when it worked (MmdbFile.on_disk)
                self._count(db, ok)
                if ok:
                    reloaded.append(db.kind)
                    log.info("reloaded the %s database %s: it changed on disk", db.kind, db.path)
                else:
                    db.on_disk.refused(stat)
        self.warn_stale()
        return reloaded

    def warn_stale(self) -> list[MmdbFile]:
        """Log a warning for each stale file not warned about in the last day (the start warned first);
        the files warned about."""
        now = self._clock()
        warned = []
        for db in self.databases.all():
            name = _key(db)
            if not db.stale():
                self._warned.pop(name, None)
                continue
            last = self._warned.setdefault(name, now)  # the start's warning counts as the first
            if now - last >= STALE_WARNING_INTERVAL:
                self._warned[name] = now
                warned.append(db)
                log.warning("%s", db.stale_warning())
        return warned

    def _count(self, db: MmdbFile, ok: bool) -> None:
        self.reloads[(db.kind, "ok" if ok else "error")] += 1
