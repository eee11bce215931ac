"""MaxMind DB files (``.mmdb``): opened once, memory-mapped, checked, reloadable in place.

A reload swaps the reader only once the new file has opened and passed its record check, so a broken file on
disk never takes the service down (docs/API.md#operations, docs/CONFIGURATION.md#geoip-databases); a
:class:`MmdbSet` asks several files of one kind in order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import maxminddb

from ipintel.addresses import IPAddress
from ipintel.infra.file_watch import FileStat, SettledFile, stat_of
from ipintel.infra.freshness import max_age_of

log = logging.getLogger("ipintel.mmdb")

# Records read by the load check; the first ones of any real file give their fields (a City file's first
# networks are 1.0.0.0/24 and on), and reading them costs a few milliseconds.
SAMPLE_RECORDS = 2000

DAY = 86_400.0


def _open(path: Path) -> maxminddb.Reader:
    """Memory-mapped with the C extension (about 1 µs a lookup); the
    pure-Python reader (about 13 µs) only where the extension is missing."""
    try:
        return maxminddb.open_database(str(path), maxminddb.MODE_MMAP_EXT)
    except ValueError:  # maxminddb raises ValueError when the extension is not built
        return maxminddb.open_database(str(path), maxminddb.MODE_MMAP)


# Builds something derived from a whole file (the ASN file's prefixes per AS) once per (re)load.
Indexer = Callable[[maxminddb.Reader], Any]


@dataclass(frozen=True)
class RecordCheck:
    """What a kind of database must give: ``needs`` in words (for the refusal), ``readable(record)`` true
    when a record gives at least one such field (ipintel/capabilities/layouts.py)."""

    needs: str
    readable: Callable[[dict[str, Any]], bool]


class Refused(Exception):
    """A file that opened but cannot serve: corrupt, or no field the service needs."""


def check_records(reader: maxminddb.Reader, check: RecordCheck) -> None:
    """Raise :class:`Refused` unless one of the file's first records is readable by ``check``; all of
    them are read, so that a corrupt data section among them is found now rather than by a request."""
    seen = readable = 0
    try:
        for _, record in itertools.islice(reader, SAMPLE_RECORDS):
            seen += 1
            if not readable and isinstance(record, dict) and check.readable(record):
                readable = seen
    except (maxminddb.InvalidDatabaseError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Refused(f"corrupt data after {seen} records: {exc}") from None
    if not readable:
        what = f"none of its first {seen} records" if seen else "it holds no record"
        raise Refused(f"{what} gives {check.needs}")


@dataclass(frozen=True)
class _Opened:
    reader: maxminddb.Reader
    # What the indexer builds from this reader, in a background thread (an ASN file's walk takes seconds
    # and must not delay start-up); swapped with the reader, never out of step. None: no indexer.
    index: concurrent.futures.Future[Any] | None = None


class MmdbFile:
    """One ``.mmdb`` file. ``lookup`` is safe to call while another thread reloads.

    ``check``: what its records must give (refused otherwise). ``optional``: a default path that need not
    exist (docs/CONFIGURATION.md#geoip-databases); absent, it is neither an error nor unready, and loads
    when it appears. ``max_age``: seconds after its build date when it is reported ``stale``; ``None``:
    twice its publisher's interval (ipintel/infra/freshness.py)."""

    def __init__(
        self,
        path: Path | str,
        *,
        kind: str,
        indexer: Indexer | None = None,
        check: RecordCheck | None = None,
        optional: bool = False,
        max_age: float | None = None,
    ) -> None:
        self.path = Path(path)
        self.kind = kind  # "city", "asn", "anonymous", "connection": used in logs and metrics
        self.indexer = indexer
        self.check = check
        self.optional = optional
        self.max_age_setting = max_age
        self._opened: _Opened | None = None
        # The stat of the file opened, against what the watcher's polls see (ipintel/infra/reload.py).
        self.on_disk = SettledFile(self.path)
        self._lock = threading.Lock()
        self.last_error: str | None = None
        # Bumped by every successful (re)load: caches of answers derived from
        # this file key on it, so a reload never serves a stale answer.
        self.generation = 0

    @property
    def loaded(self) -> bool:
        return self._opened is not None

    @property
    def absent(self) -> bool:
        """An optional file that is not there (and never was loaded): not an error."""
        return self.optional and self._opened is None and not self.path.exists()

    def load(self, *, index: bool = True) -> bool:
        """Open (or re-open) the file; keep the previous reader on failure. Returns success. ``index``:
        start building the indexer's result (not when the file is only opened to be checked)."""
        with self._lock:
            try:
                stat = os.stat(self.path)
                reader = _open(self.path)
            except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
                if self.optional and isinstance(exc, FileNotFoundError) and self._opened is None:
                    return False  # a default file not fetched (yet): nothing to say
                self.last_error = f"does not open as a MaxMind DB file: {type(exc).__name__}: {exc}"
                log.error(
                    "refused the %s database %s: %s%s",
                    self.kind,
                    self.path,
                    self.last_error,
                    "; the previous file stays loaded" if self._opened else "",
                )
                return False
            database_type = reader.metadata().database_type
            # A file that opens but gives no field its kind needs (a Country file in another layout, an ASN file
            # given as the City one, a corrupt data section) would answer null fields while /readyz says ok
            # (issue 22): refused like a file that does not open.
            if self.check is not None:
                try:
                    check_records(reader, self.check)
                except Refused as exc:
                    reader.close()
                    self.last_error = f"database_type {database_type!r}: {exc}"
                    log.error(
                        "refused the %s database %s (database_type %r): %s%s",
                        self.kind,
                        self.path,
                        database_type,
                        exc,
                        "; the previous file stays loaded" if self._opened else "",
                    )
                    return False
            built = self._start_index(reader) if index else None
            old, self._opened = self._opened, _Opened(reader, built)
            self.on_disk.loaded(FileStat.of(stat))
            self.last_error = None
            self.generation += 1
        log.info("opened %s database %s (%s, built %s)", self.kind, self.path, database_type, self.build_date)
        # The old reader is not closed: a request may still be reading from its
        # map. Dropping the reference lets the garbage collector unmap it.
        del old
        return True

    def start_index(self) -> None:
        """Build the loaded file's index now, if it was loaded without one (``load(index=False)``)."""
        with self._lock:
            opened = self._opened
            if opened is not None and opened.index is None and self.indexer is not None:
                self._opened = dataclasses.replace(opened, index=self._start_index(opened.reader))

    def _start_index(self, reader: maxminddb.Reader) -> concurrent.futures.Future[Any] | None:
        """The indexer's result for a newly opened reader, built in a thread of its own: ``None`` in the
        future when it fails (a file that opens but cannot be indexed still answers lookups)."""
        if self.indexer is None:
            return None
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        indexer, kind, path = self.indexer, self.kind, self.path

        def build() -> None:
            started = time.monotonic()
            try:
                result = indexer(reader)
            except Exception:  # a bug or a strange file must not keep the database from loading
                log.exception("indexing the %s database %s failed", kind, path)
                result = None
            log.info("indexed the %s database %s in %.1f s", kind, path, time.monotonic() - started)
            future.set_result(result)

        threading.Thread(target=build, name=f"mmdb-index-{kind}", daemon=True).start()
        return future

    @property
    def index(self) -> Any:
        """What the indexer built from the loaded file, or ``None`` (none loaded, no indexer, it failed,
        or still being built: :meth:`wait_index`)."""
        opened = self._opened
        future = opened.index if opened else None
        return future.result() if future is not None and future.done() else None

    def index_now(self, timeout: float | None = None) -> Any:
        """The index, waiting up to ``timeout`` seconds for it to be built (``None`` if not by then)."""
        opened = self._opened
        future = opened.index if opened else None
        if future is None:
            return None
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            return None

    async def wait_index(self, timeout: float) -> Any:
        """:meth:`index_now` without blocking the event loop."""
        opened = self._opened
        future = opened.index if opened else None
        if future is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        except TimeoutError:
            return None

    def changed_on_disk(self) -> bool:
        """Whether a file is on disk that is not the one opened, at once (the watcher waits for it to settle)."""
        stat = stat_of(self.path)
        return stat.exists and stat != self.on_disk.in_force

    def lookup(self, ip: IPAddress) -> tuple[dict[str, Any] | None, int]:
        """The record for ``ip`` and the prefix length of the network it was found in."""
        opened = self._opened
        if opened is None:
            raise LookupError(f"the {self.kind} database is not loaded")
        try:
            record, prefix_len = opened.reader.get_with_prefix_len(ip)
        except ValueError:  # an IPv6 address asked of an IPv4-only database
            return None, 0
        except maxminddb.InvalidDatabaseError:  # corrupt past what the load check read: no answer from it
            log.warning("the %s database %s is corrupt at %s", self.kind, self.path, ip)
            return None, 0
        return (record if isinstance(record, dict) else None), prefix_len

    @property
    def build_epoch(self) -> int | None:
        opened = self._opened
        return opened.reader.metadata().build_epoch if opened else None

    @property
    def build_date(self) -> str | None:
        epoch = self.build_epoch
        return time.strftime("%Y-%m-%d", time.gmtime(epoch)) if epoch is not None else None

    @property
    def database_type(self) -> str | None:
        opened = self._opened
        return opened.reader.metadata().database_type if opened else None

    @property
    def max_age(self) -> float:
        """Seconds after its build date past which the file is ``stale`` (docs/CONFIGURATION.md)."""
        return self.max_age_setting if self.max_age_setting is not None else max_age_of(self.database_type)

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the loaded file was built; ``None`` when none is loaded."""
        epoch = self.build_epoch
        return max(0.0, (time.time() if now is None else now) - epoch) if epoch is not None else None

    def stale(self, now: float | None = None) -> bool:
        age = self.age(now)
        return age is not None and age > self.max_age

    def stale_warning(self) -> str:
        """The one sentence logged about a stale file, at start and once a day after (the reload watcher)."""
        return (
            f"the {self.kind} database {self.path} was built {self.build_date}, {(self.age() or 0) / 86_400:.0f} days"
            f" ago: stale (over {self.max_age / 86_400:.0f} days); refresh it (docs/DEPLOYMENT.md, Reloading the"
            " databases)"
        )

    def health(self, now: float | None = None) -> dict[str, Any]:
        """This file's check in /readyz (docs/API.md#operations)."""
        age = self.age(now)
        if self.loaded:
            status = "stale" if self.stale(now) else "ok"
        else:
            status = "absent" if self.absent else "unavailable"
        return {
            "status": status,
            "path": str(self.path),
            "databaseType": self.database_type,
            "buildEpoch": self.build_epoch,
            "buildDate": self.build_date,
            "ageDays": round(age / DAY, 1) if age is not None else None,
            "maxAgeDays": round(self.max_age / DAY, 1),
            **({"error": self.last_error} if self.last_error else {}),
        }

    def close(self) -> None:
        with self._lock:
            if self._opened is not None:
                self._opened.reader.close()
                self._opened = None


class MmdbSet:
    """The files of one kind, asked in order: the first that has a record for an address answers.

    IPv4 and IPv6 are often published apart (ip-location-db, DB-IP's own files); an IPv4-only file answers
    no IPv6 address, so the next one is asked."""

    def __init__(self, files: Sequence[MmdbFile], *, kind: str) -> None:
        self.files = tuple(files)
        self.kind = kind

    @property
    def path(self) -> Path:
        """The first file's path (logs)."""
        return self.files[0].path

    @property
    def loaded(self) -> bool:
        return any(f.loaded for f in self.files)

    @property
    def ready(self) -> bool:
        """One file loaded, and every file that must be there is."""
        return self.loaded and all(f.loaded or f.absent for f in self.files)

    @property
    def generation(self) -> int:
        return sum(f.generation for f in self.files)

    def lookup(self, ip: IPAddress) -> tuple[dict[str, Any] | None, int]:
        """The first record among the loaded files, and its network's prefix length."""
        if not self.loaded:
            raise LookupError(f"no {self.kind} database is loaded")
        for db in self.files:
            if db.loaded:
                record, prefix_len = db.lookup(ip)
                if record:
                    return record, prefix_len
        return None, 0

    @property
    def build_epoch(self) -> int | None:
        """The oldest loaded file's build date: the age of the answers, at worst."""
        epochs = [f.build_epoch for f in self.files if f.build_epoch is not None]
        return min(epochs) if epochs else None

    @property
    def index(self) -> Any:
        """The first file's index (the ASN kind's AS -> networks index, one file per index)."""
        return self.files[0].index

    async def wait_index(self, timeout: float) -> Any:
        return await self.files[0].wait_index(timeout)


def _paths(value: Path | Sequence[Path] | None) -> tuple[Path, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str | Path) else tuple(Path(p) for p in value)


class GeoDatabases:
    """The configured ``.mmdb`` files, per kind; only the City ones are required to be ready.

    Each kind takes one path or several (asked in order). ``optional`` paths are defaults that need not
    exist. ``checks`` says what each kind's records must give (:class:`RecordCheck`)."""

    def __init__(
        self,
        city: Path | Sequence[Path],
        asn: Path | Sequence[Path] | None = None,
        anonymous: Path | Sequence[Path] | None = None,
        connection: Path | Sequence[Path] | None = None,
        *,
        asn_indexer: Indexer | None = None,
        checks: dict[str, RecordCheck] | None = None,
        optional: frozenset[str] = frozenset(),
        max_age: float | None = None,
    ) -> None:
        checks = checks or {}

        def files(kind: str, value: Path | Sequence[Path] | None) -> MmdbSet | None:
            paths = _paths(value)
            if not paths:
                return None
            return MmdbSet(
                [
                    MmdbFile(
                        path,
                        kind=kind,
                        # One AS -> networks index, of the first ASN file: /asn's prefixes (docs/API.md#as-record).
                        indexer=asn_indexer if kind == "asn" and i == 0 else None,
                        check=checks.get(kind),
                        optional=kind in optional,
                        max_age=max_age,
                    )
                    for i, path in enumerate(paths)
                ],
                kind=kind,
            )

        city_set = files("city", city)
        if city_set is None:
            raise ValueError("a City database path is needed")
        self.city: MmdbSet = city_set
        self.asn = files("asn", asn)
        self.anonymous = files("anonymous", anonymous)
        self.connection = files("connection", connection)
        self._sets = tuple(s for s in (self.city, self.asn, self.anonymous, self.connection) if s is not None)

    @property
    def generation(self) -> int:
        """Changes whenever any of the files is (re)loaded (read on every cached lookup)."""
        return sum(s.generation for s in self._sets)

    def all(self) -> list[MmdbFile]:
        """Every configured file, kind by kind, in order."""
        return [f for s in self._sets for f in s.files]

    def load(self, *, index: bool = True) -> list[str]:
        """Open every file; the refusals (a file there that could not be used), each a sentence."""
        refusals = []
        for db in self.all():
            if not db.load(index=index) and db.last_error is not None and db.path.exists():
                refusals.append(f"the {db.kind} database {db.path}: {db.last_error}")
        return refusals

    def start_indexes(self) -> None:
        """Build the indexes the files were loaded without (the start opens them first, so that a refusal
        stops it before anything else, and indexes once the service is about to serve)."""
        for db in self.all():
            db.start_index()

    def close(self) -> None:
        for db in self.all():
            db.close()
