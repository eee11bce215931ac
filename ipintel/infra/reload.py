"""Reloading the ``.mmdb`` files while the service runs (docs/API.md#operations).

Two triggers, one mechanism (:meth:`MmdbFile.load`, which opens the new file
first and swaps the reader only when that worked, so a request in flight keeps
the reader it started with and a broken file never replaces a good one):

- SIGHUP (``python -m ipintel`` wires it to :meth:`DatabaseWatcher.reload_all`):
  the operator says "reload now".
- A file replaced on disk: a background task compares each file's mtime and
  size with the ones it was opened with every ``interval`` seconds. A change
  is acted on only when the new stat has held still for one more interval, so
  a file copied in place (rather than written aside and renamed) is not opened
  half-written. A file that failed to open is not retried until it changes
  again, so a bad file costs one warning, not one per interval.

Polling rather than inotify: a stat of four files every few seconds costs
nothing, needs no extra dependency, and works on every volume Kubernetes
mounts (inotify misses the symlink swap of ConfigMap and projected volumes).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter

from ipintel.infra.background import BackgroundTask, poll
from ipintel.infra.mmdb import GeoDatabases, MmdbFile

log = logging.getLogger("ipintel.reload")

_StatKey = tuple[int, int, int]  # (inode, mtime_ns, size)


def _stat_key(db: MmdbFile) -> _StatKey | None:
    try:
        st = os.stat(db.path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class DatabaseWatcher:
    """Reloads the configured ``.mmdb`` files on demand and when they change on disk.

    ``reloads`` counts attempts by ``(kind, outcome)``, ``outcome`` being
    ``ok`` or ``error``; /metrics exports it."""

    def __init__(self, databases: GeoDatabases, *, interval: float) -> None:
        self.databases = databases
        self.interval = interval
        self.reloads: Counter[tuple[str, str]] = Counter()
        self._pending: dict[str, _StatKey] = {}  # kind -> the changed stat seen at the last check
        self._failed: dict[str, _StatKey] = {}  # kind -> the stat of a file that did not open
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
                self._count(db, ok)
                self._pending.pop(db.kind, None)
                self._failed.pop(db.kind, None)
        loaded = [db.kind for db, ok in results if ok]
        log.info("reloaded GeoIP databases on request: %s", ", ".join(loaded) or "none")
        return loaded

    async def check(self) -> list[str]:
        """One poll: reload the files whose change has settled; the kinds reloaded."""
        reloaded: list[str] = []
        async with self._lock:
            for db in self.databases.all():
                if not db.changed_on_disk():
                    self._pending.pop(db.kind, None)
                    self._failed.pop(db.kind, None)
                    continue
                key = _stat_key(db)
                if key is None or key == self._failed.get(db.kind):
                    continue
                if self._pending.get(db.kind) != key:
                    self._pending[db.kind] = key  # changed: act when it holds still one interval
                    continue
                del self._pending[db.kind]
                ok = await asyncio.to_thread(db.load)
                self._count(db, ok)
                if ok:
                    reloaded.append(db.kind)
                    log.info("reloaded the %s database %s: it changed on disk", db.kind, db.path)
                else:
                    self._failed[db.kind] = key
        return reloaded

    def _count(self, db: MmdbFile, ok: bool) -> None:
        self.reloads[(db.kind, "ok" if ok else "error")] += 1
