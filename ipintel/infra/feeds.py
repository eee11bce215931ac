"""Address feeds: downloaded in the background, validated, kept on disk, matched in memory.

:class:`FeedManager` owns every feed of :mod:`~ipintel.infra.feed_catalogue`: it loads each one's last good
snapshot, refreshes it on its own schedule, installs a download only when it validates, and tells /readyz,
/metrics and the verdicts how each feed is (docs/API.md#vpn-proxy-hosting-and-mobile-detection--get-ipipvpn).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ipintel.errors import ApiError, UpstreamError
from ipintel.infra import feed_formats as formats
from ipintel.infra.background import BackgroundTask
from ipintel.infra.feed_catalogue import DEFAULT_FEEDS, FeedSpec
from ipintel.infra.ranges import AddressRanges, PrefixError, parse_prefix
from ipintel.infra.upstream import HttpClient, RedirectRefused

log = logging.getLogger("ipintel.feeds")

# Being *on* a list of exit addresses is stronger evidence than falling in a provider's /16, so each entry is
# tagged with which it was.
HOST = "host"  # the entry was a single address (a /32 or /128)
NET = "net"  # the entry was a wider prefix

# After a failed refresh, retry after 1, 2, 4 ... minutes, never later than the feed's interval.
RETRY_BASE = 60.0
MAX_REDIRECTS = 5
# A snapshot holds the parsed prefixes, not the raw bodies: one small text file per feed whatever its published
# format (JSON, CSV, two files for v4 and v6), which loads without the format parsers. v2 lines may carry a
# region after the prefix (``3.5.140.0/22 ap-northeast-2``); v1 files (prefixes only) are still read.
_SNAPSHOT_MAGIC = "# ipintel feed snapshot v2"
_SNAPSHOT_MAGICS = (_SNAPSHOT_MAGIC, "# ipintel feed snapshot v1")


def configured_urls(spec: FeedSpec, overrides: Mapping[str, str | None]) -> tuple[str, ...] | None:
    """The feed's sources after ``IPINTEL_FEED_URLS``: ``None`` when disabled.

    An override may list several URLs separated by spaces or ``|`` (one
    entry of the comma-separated variable), for feeds published as separate
    IPv4 and IPv6 files."""
    if spec.name not in overrides:
        return spec.urls
    value = overrides[spec.name]
    if value is None:
        return None
    urls = tuple(u for u in re.split(r"[\s|]+", value) if u)
    return urls or None


def snapshot_lines(parsed: formats.Parsed) -> list[str]:
    """The parsed prefixes as snapshot lines: ``prefix`` or ``prefix region``."""
    if parsed.labels is None:
        return parsed.prefixes
    return [f"{p} {label}" if label else p for p, label in zip(parsed.prefixes, parsed.labels, strict=True)]


def build_ranges(lines: Iterable[str], provider: str | None = None) -> AddressRanges[str]:
    """Index snapshot lines (``prefix`` or ``prefix region``), tagging single addresses
    ``host`` and wider prefixes ``net``. With the feed's ``provider``, an entry with a
    region is also tagged with the operator's name and the region (``"AWS us-east-1"``):
    the names are interned, one string per region, and a lookup returns them with the
    ``host``/``net`` tag in the same set."""
    names: dict[str, str] = {}
    count = 0

    def entries() -> Iterable[tuple[int, int, int, str]]:
        nonlocal count
        for line in lines:
            text, _, label = line.partition(" ")
            try:
                version, first, last, length = parse_prefix(text)
            except PrefixError:
                continue
            count += 1
            yield version, first, last, HOST if length == (32 if version == 4 else 128) else NET
            label = label.strip()
            if label and provider is not None:
                name = names.get(label)
                if name is None:
                    if len(names) >= formats.MAX_LABELS or not formats.LABEL.fullmatch(label):
                        continue  # bounded as the parsers bound them, whatever the file on disk holds
                    name = names[label] = f"{provider} {label}"
                yield version, first, last, name

    ranges = AddressRanges.build(entries())
    ranges.prefixes = count  # entries as published: a named one is two index entries
    return ranges


def named_provider(tags: frozenset[str]) -> str | None:
    """The operator-and-region tag among a lookup's tags (the first by name when
    overlapping entries give several); ``None`` when there is none."""
    names = [tag for tag in tags if tag != HOST and tag != NET]
    return min(names) if names else None


@dataclass
class FeedState:
    """One feed at run time: its loaded copy and what happened to it lately."""

    spec: FeedSpec
    urls: tuple[str, ...] | None  # None: disabled
    ranges: AddressRanges[str] | None = None
    fetched_at: float | None = None  # wall-clock time of the download the loaded copy came from
    last_error: str | None = None
    failures: int = 0  # consecutive failed refreshes
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def enabled(self) -> bool:
        return self.urls is not None


class FeedManager:
    """Every feed: loading, refreshing, storing, matching and health.

    ``clock`` is wall-clock time (``time.time``): ages survive restarts
    because the snapshot records when its data was downloaded."""

    def __init__(
        self,
        http: HttpClient,
        directory: Path,
        *,
        overrides: Mapping[str, str | None] | None = None,
        specs: Iterable[FeedSpec] = DEFAULT_FEEDS,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http = http
        self.directory = Path(directory)
        self.timeout = timeout
        self.clock = clock
        overrides = overrides or {}
        self.feeds: dict[str, FeedState] = {
            spec.name: FeedState(spec, configured_urls(spec, overrides)) for spec in specs
        }
        self.snapshots_loaded = asyncio.Event()
        # complete() is true until then: -inf while an enabled feed is missing, +inf with none enabled.
        self._fresh_until = -math.inf if any(s.enabled for s in self.feeds.values()) else math.inf
        self.generation = 0  # counts installed copies: an index built from the feeds knows it is current
        self._task = BackgroundTask("feeds")

    # Health --------------------------------------------------------------------

    def status(self, name: str) -> str:
        state = self.feeds[name]
        if not state.enabled:
            return "disabled"
        if state.ranges is None or state.fetched_at is None:
            return "missing"
        return "stale" if self.clock() - state.fetched_at > state.spec.stale_after else "ok"

    def health(self) -> dict[str, dict[str, Any]]:
        """Name -> ``{"status", "ageSeconds", "prefixes"}`` (+ ``"error"`` after a failed refresh)."""
        now = self.clock()
        report: dict[str, dict[str, Any]] = {}
        for name, state in self.feeds.items():
            entry: dict[str, Any] = {
                "status": self.status(name),
                "ageSeconds": round(max(0.0, now - state.fetched_at), 1) if state.fetched_at is not None else None,
                "prefixes": state.ranges.prefixes if state.ranges is not None else 0,
            }
            if state.enabled and state.last_error:
                entry["error"] = state.last_error
            report[name] = entry
        return report

    def complete(self) -> bool:
        """Every enabled feed is loaded and fresh. Asked on every negative verdict,
        so it is one comparison: :meth:`_install` keeps the moment it stops being true."""
        return self.clock() <= self._fresh_until

    def _install(self, state: FeedState, ranges: AddressRanges[str], fetched_at: float) -> None:
        state.ranges, state.fetched_at = ranges, fetched_at
        self.generation += 1
        deadlines = [
            s.fetched_at + s.spec.stale_after if s.ranges is not None and s.fetched_at is not None else -math.inf
            for s in self.feeds.values()
            if s.enabled
        ]
        self._fresh_until = min(deadlines, default=math.inf)

    # Lifecycle -----------------------------------------------------------------

    def start(self, *, refresh: bool) -> None:
        """Load the snapshots and (when ``refresh``) keep the feeds fresh, in the
        background: the caller does not wait for any of it."""
        self._task.start(lambda: self._run(refresh))

    async def close(self) -> None:
        await self._task.stop()

    async def _run(self, refresh: bool) -> None:
        try:
            await self.load_snapshots()
        finally:
            self.snapshots_loaded.set()
        if refresh:
            loops = [self._refresh_loop(state) for state in self.feeds.values() if state.enabled]
            await asyncio.gather(*loops)

    async def _refresh_loop(self, state: FeedState) -> None:
        while True:
            delay = self.next_refresh_in(state)
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await self.refresh(state.name)
            except Exception:  # a bug must not end the loop: the feed would silently go stale
                log.exception("refreshing feed %s failed unexpectedly", state.name)
                state.failures += 1

    def next_refresh_in(self, state: FeedState) -> float:
        """Seconds until the feed should be downloaded again."""
        if state.failures:
            return min(state.spec.interval, RETRY_BASE * 2.0 ** min(state.failures - 1, 16))
        if state.fetched_at is None:
            return 0.0
        return max(0.0, state.fetched_at + state.spec.interval - self.clock())

    # Snapshots -----------------------------------------------------------------

    def snapshot_path(self, name: str) -> Path:
        return self.directory / f"{name}.txt"

    async def load_snapshots(self) -> None:
        for state in self.feeds.values():
            if state.enabled and state.ranges is None:
                # In a worker thread, so the service answers at once.
                loaded = await asyncio.to_thread(self._read_snapshot, state.spec)
                if loaded is not None and state.ranges is None:  # a download may have won the race
                    self._install(state, *loaded)

    def _read_snapshot(self, spec: FeedSpec) -> tuple[AddressRanges[str], float] | None:
        path = self.snapshot_path(spec.name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read feed snapshot %s: %s", path, exc)
            return None
        lines = text.splitlines()
        try:
            if lines[0] not in _SNAPSHOT_MAGICS:
                raise ValueError("not a feed snapshot")
            meta = json.loads(lines[1].removeprefix("#"))
            fetched_at = float(meta["fetchedAt"])
        except (IndexError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring feed snapshot %s: %s", path, exc)
            return None
        ranges = build_ranges(lines[2:], spec.provider)
        if ranges.prefixes < spec.min_prefixes:
            log.warning(
                "ignoring feed snapshot %s: %d prefixes, fewer than %d", path, ranges.prefixes, spec.min_prefixes
            )
            return None
        log.info("loaded feed %s from %s (%d prefixes)", spec.name, path, ranges.prefixes)
        return ranges, fetched_at

    def _write_snapshot(self, state: FeedState, lines: list[str], fetched_at: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = {
            "feed": state.name,
            "fetchedAt": fetched_at,
            "sources": list(state.urls or ()),
            "prefixes": len(lines),
        }
        fd, tmp = tempfile.mkstemp(prefix=f".{state.name}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(f"{_SNAPSHOT_MAGIC}\n# {json.dumps(meta)}\n")
                out.write("\n".join(lines))
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.snapshot_path(state.name))  # a crash mid-write never leaves half a file
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    # Downloads -----------------------------------------------------------------

    async def refresh(self, name: str) -> bool:
        """Download, validate and install one feed now. ``False`` (and the
        last good copy kept) when anything about the new copy is wrong."""
        state = self.feeds[name]
        if not state.enabled:
            return False
        async with state.lock:
            started = self.clock()
            try:
                bodies = [await self._fetch(state.spec, url) for url in state.urls or ()]
                parsed = await asyncio.to_thread(state.spec.parser, bodies)
                if len(parsed.prefixes) < state.spec.min_prefixes:
                    raise formats.FeedFormatError(
                        f"only {len(parsed.prefixes)} prefixes, fewer than the {state.spec.min_prefixes} expected"
                    )
                lines = snapshot_lines(parsed)
                ranges = await asyncio.to_thread(build_ranges, lines, state.spec.provider)
            except (ApiError, formats.FeedFormatError) as exc:
                state.failures += 1
                state.last_error = str(exc)
                log.warning("feed %s not refreshed (keeping the %s copy): %s", name, self.status(name), exc)
                return False
            try:
                await asyncio.to_thread(self._write_snapshot, state, lines, started)
            except OSError as exc:  # the new copy is good: use it, even if it cannot be kept
                log.error("cannot store feed snapshot %s: %s", self.snapshot_path(name), exc)
            self._install(state, ranges, started)
            state.failures, state.last_error = 0, None
            log.info("feed %s refreshed: %d prefixes (%d skipped)", name, ranges.prefixes, parsed.skipped)
            return True

    async def _fetch(self, spec: FeedSpec, url: str) -> bytes:
        body = await self._get(spec, url)
        # Microsoft's JSON starts with a byte-order mark; anything else that is not JSON is the page.
        if spec.locate is not None and body.lstrip().removeprefix(b"\xef\xbb\xbf")[:1] not in (b"{", b"["):
            link = spec.locate(body)
            if link is None:
                raise formats.FeedFormatError(f"no data link found on {url}")
            body = await self._get(spec, link)
        return body

    async def _get(self, spec: FeedSpec, url: str) -> bytes:
        """GET with redirects followed (a few hops, never from HTTPS down to HTTP)."""
        try:
            followed = await self.http.get_following_redirects(
                url,
                max_redirects=MAX_REDIRECTS,
                refuse_loops=False,  # a loop ends as "more than MAX_REDIRECTS redirects"
                what=lambda hop: f"feed {spec.name} ({urlsplit(hop).netloc})",
                timeout=self.timeout,
                max_bytes=spec.max_bytes,
                source=f"feed:{spec.name}",
            )
        except RedirectRefused as refused:
            if refused.problem == "too-many":
                raise UpstreamError(f"feed {spec.name}: more than {MAX_REDIRECTS} redirects") from None
            scheme = urlsplit(refused.current).scheme.upper()
            target = refused.target if refused.target is not None else "an invalid URL"
            raise UpstreamError(f"feed {spec.name}: refusing a redirect from {scheme} to {target}") from None
        response = followed.response
        if response.status != 200:
            raise UpstreamError(f"feed {spec.name} answered HTTP {response.status} at {followed.urls[-1]}")
        return response.body
