"""Reloading the ``.mmdb`` files while the service runs (docs/API.md#operations): on SIGHUP
(:meth:`DatabaseWatcher.reload_all`) and when a file is replaced on disk (the rule of
:class:`~ipintel.infra.file_watch.SettledFile`), through :meth:`MmdbFile.load`, which swaps the reader only once
the new file opened. The same task warns once a day about each stale file (:mod:`ipintel.infra.freshness`).
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
