"""One watched file's rule: "it changed, and the change has held still" (the ``.mmdb`` files, the API key file).

A watcher polls a file's stat and acts on a change only when the next poll finds the same stat, so a file
copied in place (rather than written aside and renamed) is never read half-written; a version that was
refused is not offered again until the file changes again, so a bad file costs one refusal, not one a poll.
Its users load the file themselves and say how it went: :mod:`ipintel.infra.reload` (the ``.mmdb`` files,
through :attr:`ipintel.infra.mmdb.MmdbFile.on_disk`) and :mod:`ipintel.web.api_keys` (the API key file).
"""

# Polling rather than inotify: a stat of a few files every few seconds costs nothing, needs no dependency, and
# works on every volume Kubernetes mounts (inotify misses the symlink swap of ConfigMap and projected volumes).

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class FileStat(NamedTuple):
    """What tells one version of a file from another: a file renamed over the path has a new inode (even with
    the old one's mtime and size, as ``cp -p`` can leave them); one rewritten in place a new mtime or size."""

    inode: int
    mtime_ns: int
    size: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileStat:
        return cls(stat.st_ino, stat.st_mtime_ns, stat.st_size)

    @property
    def exists(self) -> bool:
        return self != GONE


# The stat of a path with no file: a state like any other, so that a removal too is seen once it held still.
GONE = FileStat(0, 0, -1)


def stat_of(path: Path) -> FileStat:
    """The stat of the file at ``path`` now (a symlink followed); :data:`GONE` when it cannot be had."""
    try:
        return FileStat.of(os.stat(path))
    except OSError:
        return GONE


class SettledFile:
    """A watched file: the stat of the version in force, and what the polls have seen since.

    :meth:`settled_change` is one poll; the user then loads that version and says :meth:`loaded` or
    :meth:`refused`. :meth:`forget` drops what the polls saw, for a reload asked for by an operator."""

    def __init__(self, path: Path, in_force: FileStat = GONE) -> None:
        self.path = path
        self.in_force = in_force  # the version loaded; GONE: none (a file that appears is a change)
        self._pending: FileStat | None = None  # a new stat seen at the last poll, acted on if it holds still
        self._refused: FileStat | None = None  # a version not taken: not offered again until the file changes

    def settled_change(self) -> FileStat | None:
        """One poll: the stat of a version other than the one in force that has held still since the last
        poll and was not refused (:data:`GONE`: the file was removed); ``None``: nothing to act on yet."""
        stat = stat_of(self.path)
        if stat == self.in_force:
            self._pending = self._refused = None  # back to the version in force: whatever came between is over
            return None
        if stat == self._refused:
            return None
        if stat != self._pending:
            self._pending = stat  # changed: acted on if it is the same at the next poll
            return None
        self._pending = None
        return stat

    def loaded(self, stat: FileStat) -> None:
        """The version of ``stat`` is now in force (:data:`GONE`: none is, the file being removed)."""
        self.in_force = stat
        self._pending = None

    def refused(self, stat: FileStat) -> None:
        """The version of ``stat`` was not taken (it failed to load, or its user does not act on it): it is
        not offered again until the file changes again."""
        self._refused = stat
        self._pending = None

    def forget(self) -> None:
        """Forget what the polls saw (a change pending, a version refused): the next poll starts afresh."""
        self._pending = self._refused = None
