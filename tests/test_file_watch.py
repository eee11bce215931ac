"""The one rule of a watched file (ipintel/infra/file_watch.py): a change is acted on once it has held still for
one poll, a refused version is not offered again until the file changes, a removal is a change like any other;
and its two users, the ``.mmdb`` watcher and the API key file, on real files.

A poll here is a direct call: the held-still timing is counted in polls, whatever the interval between them.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pytest

from ipintel.addresses import parse_ip
from ipintel.infra.file_watch import GONE, FileStat, SettledFile, stat_of
from ipintel.infra.mmdb import GeoDatabases, MmdbFile
from ipintel.infra.reload import DatabaseWatcher
from ipintel.web.api_keys import ApiKeys
from ipintel.web.key_file import read_key_file
from tests.support.mmdb import city_record, write_city_db


def write_aside(path: Path, text: str) -> Path:
    """Replace the file as fetch-geoip and Kubernetes do: a new file renamed over the old one."""
    aside = path.with_name(path.name + ".new")
    aside.write_text(text)
    os.replace(aside, path)
    return path


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return write_aside(tmp_path / "watched.txt", "first version\n")


@pytest.fixture
def watched(path: Path) -> SettledFile:
    return SettledFile(path, stat_of(path))


# The rule -------------------------------------------------------------------------------------------------


def test_an_unchanged_file_is_never_a_change(watched: SettledFile) -> None:
    assert [watched.settled_change() for _ in range(3)] == [None, None, None]


def test_a_change_is_acted_on_only_once_it_has_held_still_for_one_poll(path: Path, watched: SettledFile) -> None:
    # Copied in place, a line at a time: each poll finds it grown, so none offers a half-written file.
    with path.open("a") as file:
        for n in range(3):
            file.write(f"line {n}\n")
            file.flush()
            assert watched.settled_change() is None
    assert watched.settled_change() == stat_of(path)  # the same stat twice running: settled
    watched.loaded(stat_of(path))
    assert watched.in_force == stat_of(path) and watched.settled_change() is None


def test_a_refused_version_is_not_offered_again_until_the_file_changes(path: Path, watched: SettledFile) -> None:
    write_aside(path, "a broken version\n")
    assert watched.settled_change() is None
    broken = watched.settled_change()
    assert broken == stat_of(path)
    watched.refused(broken)
    assert [watched.settled_change() for _ in range(3)] == [None, None, None]
    write_aside(path, "a good version, at last\n")
    assert watched.settled_change() is None
    assert watched.settled_change() == stat_of(path) != broken


def test_forget_offers_a_refused_version_again_after_it_holds_still(path: Path, watched: SettledFile) -> None:
    # What an operator's reload (SIGHUP) starts from: nothing pending, nothing refused.
    write_aside(path, "a broken version\n")
    watched.settled_change()
    broken = watched.settled_change()
    assert broken is not None
    watched.refused(broken)
    watched.forget()
    assert watched.settled_change() is None
    assert watched.settled_change() == broken


def test_a_file_renamed_over_with_the_old_mtime_and_size_is_a_change(path: Path, watched: SettledFile) -> None:
    old = os.stat(path)
    aside = path.with_name("aside")
    aside.write_text("same length!!\n")  # as long as "first version\n"
    os.utime(aside, ns=(old.st_atime_ns, old.st_mtime_ns))  # as cp -p or a ConfigMap's copy may leave it
    os.replace(aside, path)
    new = stat_of(path)
    assert (new.mtime_ns, new.size) == (old.st_mtime_ns, old.st_size) and new.inode != old.st_ino
    assert watched.settled_change() is None
    assert watched.settled_change() == new


def test_a_removed_file_is_reported_once_it_has_held_still_and_its_return_is_a_change(
    path: Path, watched: SettledFile
) -> None:
    path.unlink()
    assert stat_of(path) == GONE and not GONE.exists
    assert watched.settled_change() is None
    assert watched.settled_change() == GONE
    watched.loaded(GONE)  # the user acted: nothing is in force now
    assert [watched.settled_change() for _ in range(2)] == [None, None]
    write_aside(path, "back\n")
    assert watched.settled_change() is None
    back = watched.settled_change()
    assert back == stat_of(path) and back is not None and back.exists


def test_a_file_that_appears_is_a_change_when_none_was_in_force(tmp_path: Path) -> None:
    path = tmp_path / "not-yet.txt"
    watched = SettledFile(path)  # nothing in force: an absent file is no change
    assert [watched.settled_change() for _ in range(2)] == [None, None]
    write_aside(path, "here now\n")
    assert watched.settled_change() is None
    assert watched.settled_change() == stat_of(path)


def test_a_file_back_as_the_version_in_force_is_no_change_and_ends_a_refusal(path: Path, watched: SettledFile) -> None:
    original = path.with_name("original")
    os.link(path, original)  # the version in force, kept under another name
    write_aside(path, "a broken version\n")
    watched.settled_change()
    broken = watched.settled_change()
    assert broken is not None
    watched.refused(broken)
    os.link(path, path.with_name("broken"))  # the refused version, kept too
    os.replace(original, path)  # the version in force, back: same inode, mtime and size
    assert watched.settled_change() is None
    # The refusal ended with it: the very version refused, renamed in again, is offered once it holds still.
    os.replace(path.with_name("broken"), path)
    assert stat_of(path) == broken
    assert watched.settled_change() is None
    assert watched.settled_change() == broken


def test_a_stat_tells_versions_apart_by_inode_mtime_and_size(path: Path) -> None:
    st = os.stat(path)
    assert stat_of(path) == FileStat.of(st) == FileStat(st.st_ino, st.st_mtime_ns, st.st_size)
    assert stat_of(path).exists and stat_of(path.with_name("missing")) == GONE


# Its users ------------------------------------------------------------------------------------------------


def city_of_8_8_8_8(db: MmdbFile) -> str | None:
    record, _ = db.lookup(parse_ip("8.8.8.8"))
    return None if record is None else str(record["city"]["names"]["en"])


async def test_the_mmdb_watcher_reloads_a_replaced_file_at_the_second_poll_and_keeps_a_removed_ones_reader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    city = write_city_db(tmp_path / "city.mmdb")
    databases = GeoDatabases(city)
    databases.load(index=False)
    watcher = DatabaseWatcher(databases, interval=5)
    db = databases.all()[0]
    try:
        aside = write_city_db(tmp_path / "next.mmdb", {"8.8.8.0/24": city_record(country="CH", city="Zurich")})
        os.replace(aside, city)
        with caplog.at_level(logging.INFO, logger="ipintel.reload"):
            assert await watcher.check() == []  # seen, not yet held still
            assert await watcher.check() == ["city"]
            assert await watcher.check() == []
        assert "reloaded the city database" in caplog.text and watcher.reloads == {("city", "ok"): 1}
        assert city_of_8_8_8_8(db) == "Zurich"
        # Removed: no change to act on; the reader opened keeps answering, nothing is counted.
        city.unlink()
        assert [await watcher.check() for _ in range(3)] == [[], [], []]
        assert watcher.reloads == {("city", "ok"): 1} and db.loaded
        assert city_of_8_8_8_8(db) == "Zurich"
        # A file back is loaded like any change.
        write_city_db(tmp_path / "next.mmdb")
        os.replace(tmp_path / "next.mmdb", city)
        assert [await watcher.check() for _ in range(2)] == [[], ["city"]]
        assert city_of_8_8_8_8(db) == "Mountain View"
    finally:
        databases.close()


async def test_the_mmdb_watcher_tries_a_broken_file_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    city = write_city_db(tmp_path / "city.mmdb")
    databases = GeoDatabases(city)
    databases.load(index=False)
    watcher = DatabaseWatcher(databases, interval=5)
    try:
        write_aside(city, "this is not a MaxMind database\n")
        with caplog.at_level(logging.ERROR, logger="ipintel.mmdb"):
            assert [await watcher.check() for _ in range(5)] == [[]] * 5
        assert watcher.reloads == {("city", "error"): 1}
        assert len([r for r in caplog.records if "refused the city database" in r.message]) == 1
    finally:
        databases.close()


async def test_a_removed_key_file_is_found_by_the_poll_and_revokes_every_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before SettledFile the poll saw a removal only after a refused file: a removal's stat and "nothing refused"
    # were both None. The keys stayed in force.
    key = "k" * 43
    path = write_aside(tmp_path / "keys.txt", f"alice sha256:{hashlib.sha256(key.encode()).hexdigest()}\n")
    keys = ApiKeys(path, read_key_file(path))
    assert keys.names == ["alice"] and await keys.check() is False
    path.unlink()
    with caplog.at_level(logging.ERROR, logger="ipintel.api_keys"):
        assert await keys.check() is False  # seen, not yet held still
        assert await keys.check() is True
        assert await keys.check() is False  # acted on once
    assert keys.names == [] and keys.reloads == {"removed": 1}
    assert len([r for r in caplog.records if "is gone (it changed on disk)" in r.message]) == 1


async def test_a_key_file_being_written_is_read_once_it_has_held_still(tmp_path: Path) -> None:
    lines = [f"{name} sha256:{hashlib.sha256(name.encode() * 8).hexdigest()}\n" for name in ("alice", "bob", "carol")]
    path = write_aside(tmp_path / "keys.txt", lines[0])
    keys = ApiKeys(path, read_key_file(path))
    with path.open("a") as file:  # copied in place, a line at a time
        for text in lines[1:]:
            file.write(text)
            file.flush()
            assert await keys.check() is False and keys.names == ["alice"]
    assert await keys.check() is True and keys.names == ["alice", "bob", "carol"]
    assert keys.reloads == {"ok": 1}
