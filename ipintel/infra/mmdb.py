"""MaxMind DB files (``.mmdb``): opened once, memory-mapped, reloadable in place.

A reload opens the new file first and swaps the reader only when that
succeeded, so requests in flight keep the old reader and a broken file on
disk never takes the service down (docs/API.md#operations).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import maxminddb

from ipintel.addresses import IPAddress

log = logging.getLogger("ipintel.mmdb")


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
class _Opened:
    reader: maxminddb.Reader
    mtime_ns: int
    size: int
    index: Any = None  # what the indexer built from this reader; swapped with it, never out of step


class MmdbFile:
    """One ``.mmdb`` file. ``lookup`` is safe to call while another thread reloads."""

    def __init__(self, path: Path | str, *, kind: str, indexer: Indexer | None = None) -> None:
        self.path = Path(path)
        self.kind = kind  # "city", "asn", "anonymous", "connection": used in logs and metrics
        self.indexer = indexer
        self._opened: _Opened | None = None
        self._lock = threading.Lock()
        self.last_error: str | None = None
        # Bumped by every successful (re)load: caches of answers derived from
        # this file key on it, so a reload never serves a stale answer.
        self.generation = 0

    @property
    def loaded(self) -> bool:
        return self._opened is not None

    def load(self) -> bool:
        """Open (or re-open) the file; keep the previous reader on failure. Returns success."""
        with self._lock:
            try:
                stat = os.stat(self.path)
                reader = _open(self.path)
            except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("cannot open %s database %s: %s", self.kind, self.path, self.last_error)
                return False
            index = self._build_index(reader)
            old, self._opened = self._opened, _Opened(reader, stat.st_mtime_ns, stat.st_size, index)
            self.last_error = None
            self.generation += 1
        log.info(
            "opened %s database %s (%s, built %s)",
            self.kind,
            self.path,
            reader.metadata().database_type,
            reader.metadata().build_epoch,
        )
        # The old reader is not closed: a request may still be reading from its
        # map. Dropping the reference lets the garbage collector unmap it.
        del old
        return True

    def _build_index(self, reader: maxminddb.Reader) -> Any:
        """The indexer's result for a newly opened reader (before it serves), ``None`` when it fails:
        a file that opens but cannot be indexed still answers lookups."""
        if self.indexer is None:
            return None
        try:
            return self.indexer(reader)
        except Exception:  # a bug or a strange file must not keep the database from loading
            log.exception("indexing the %s database %s failed", self.kind, self.path)
            return None

    @property
    def index(self) -> Any:
        """What the indexer built from the loaded file, or ``None`` (none loaded, no indexer, it failed)."""
        opened = self._opened
        return opened.index if opened else None

    def changed_on_disk(self) -> bool:
        opened = self._opened
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return opened is None or (stat.st_mtime_ns, stat.st_size) != (opened.mtime_ns, opened.size)

    def lookup(self, ip: IPAddress) -> tuple[dict[str, Any] | None, int]:
        """The record for ``ip`` and the prefix length of the network it was found in."""
        opened = self._opened
        if opened is None:
            raise LookupError(f"the {self.kind} database is not loaded")
        try:
            record, prefix_len = opened.reader.get_with_prefix_len(ip)
        except ValueError:  # an IPv6 address asked of an IPv4-only database
            return None, 0
        return (record if isinstance(record, dict) else None), prefix_len

    @property
    def build_epoch(self) -> int | None:
        opened = self._opened
        return opened.reader.metadata().build_epoch if opened else None

    @property
    def database_type(self) -> str | None:
        opened = self._opened
        return opened.reader.metadata().database_type if opened else None

    def close(self) -> None:
        with self._lock:
            if self._opened is not None:
                self._opened.reader.close()
                self._opened = None


class GeoDatabases:
    """The configured ``.mmdb`` files; only the City one is required to be ready."""

    def __init__(
        self,
        city: Path,
        asn: Path | None = None,
        anonymous: Path | None = None,
        connection: Path | None = None,
        *,
        asn_indexer: Indexer | None = None,
    ) -> None:
        self.city = MmdbFile(city, kind="city")
        self.asn = MmdbFile(asn, kind="asn", indexer=asn_indexer) if asn else None
        self.anonymous = MmdbFile(anonymous, kind="anonymous") if anonymous else None
        self.connection = MmdbFile(connection, kind="connection") if connection else None
        self._optional = tuple(db for db in (self.asn, self.anonymous, self.connection) if db is not None)

    @property
    def generation(self) -> int:
        """Changes whenever any of the files is (re)loaded (read on every cached lookup)."""
        generation = self.city.generation
        for db in self._optional:
            generation += db.generation
        return generation

    def all(self) -> list[MmdbFile]:
        return [db for db in (self.city, self.asn, self.anonymous, self.connection) if db is not None]

    def load(self) -> None:
        for db in self.all():
            db.load()

    def close(self) -> None:
        for db in self.all():
            db.close()
