"""Prometheus metrics (docs/API.md#operations): what ``GET /metrics`` exposes. Requests and upstream calls are
observed as they happen (:class:`RequestCollector`, cheap on the hot path); every other figure is the counters
the components already keep, read when scraped (:class:`StateCollector`).
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ipintel import __version__

log = logging.getLogger("ipintel.metrics")

# No ``*_created`` series: they double the series count and Prometheus does not
# need them to compute rates. (A process-wide switch of prometheus-client.)
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated

# Request latency: the service answers from memory in about a millisecond and
# from upstreams in tens of milliseconds up to the timeouts (2 s DNS, 3 s
# blacklist deadline, 5 s HTTP).
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UPSTREAM_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0)

# Any other method a client invents is counted as "other": label values must stay bounded.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """The registry of one app and the hooks that feed it.

    ``intel``: the :class:`~ipintel.service.Intel` (or anything with the same
    attributes); ``limiter``: the rate limiter or ``None``; ``watcher``: the
    :class:`~ipintel.infra.reload.DatabaseWatcher` or ``None``; ``api_keys``: the
    :class:`~ipintel.web.api_keys.ApiKeys` or ``None``."""

    def __init__(self, intel: Any, *, limiter: Any = None, watcher: Any = None, api_keys: Any = None) -> None:
        # Its own registry, not prometheus-client's global one: a process (a test run) can create many apps
        # without "duplicated timeseries" errors, and one app's numbers never leak into another's.
        self.registry = CollectorRegistry()
        self.requests = RequestCollector()
        self.registry.register(self.requests)
        self.upstream_seconds = Histogram(
            "ipintel_upstream_call_duration_seconds",
            "Duration of calls to upstreams (DNS, RDAP, reputation APIs, feeds), by source and outcome.",
            ["source", "outcome"],
            buckets=UPSTREAM_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(StateCollector(intel, limiter=limiter, watcher=watcher))
        if api_keys is not None:
            self.registry.register(ApiKeysCollector(api_keys))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        stats = getattr(intel, "upstream_stats", None)
        observers = getattr(stats, "observers", None)
        if isinstance(observers, list):
            observers.append(self.observe_upstream)

    # By route *template* (/ip/{ip}), never the raw path: one series per looked-up address would be unbounded.
    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Called once per HTTP request by the request middleware."""
        self.requests.observe(method, route, status, seconds)

    def observe_upstream(self, source: str, outcome: str, seconds: float) -> None:
        """An :class:`~ipintel.infra.stats.UpstreamStats` observer."""
        self.upstream_seconds.labels(source, outcome).observe(seconds)


class RequestCollector(Collector):
    """Request counts and latencies by route template and status, kept as plain
    numbers and turned into a counter and a histogram only when scraped.

    prometheus-client's Counter and Histogram take a lock per update and walk
    the buckets in Python; on the hot path of every request that was several
    microseconds. Here an observation is a dict lookup, a bisect (in C) and
    three additions; all of it runs on the event loop's thread, as does the
    scrape, so no lock is needed."""

    def __init__(self) -> None:
        # (method, route, status) -> [count, sum of seconds, per-bucket counts (the last is +Inf)]
        self._series: dict[tuple[str, str, int], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        if method not in _METHODS:  # any method a client invents: label values stay bounded
            method = "other"
        series = self._series.get((method, route, status))
        if series is None:
            series = self._series[(method, route, status)] = [0, 0.0] + [0] * (len(REQUEST_BUCKETS) + 1)
        series[0] += 1
        series[1] += seconds
        series[2 + bisect.bisect_left(REQUEST_BUCKETS, seconds)] += 1

    def collect(self) -> Iterable[Metric]:
        counts = CounterMetricFamily(
            "ipintel_http_requests",
            "HTTP requests answered, by method, route template and status.",
            labels=["method", "route", "status"],
        )
        by_route: dict[tuple[str, int], list[float]] = {}
        for (method, route, status), series in sorted(self._series.items()):
            counts.add_metric([method, route, str(status)], series[0])
            total = by_route.setdefault((route, status), [0.0] * len(series))
            for i, value in enumerate(series):
                total[i] += value
        yield counts
        latency = HistogramMetricFamily(
            "ipintel_http_request_duration_seconds",
            "Time from receiving a request to the end of its response, by route template and status.",
            labels=["route", "status"],
        )
        for (route, status), series in sorted(by_route.items()):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*REQUEST_BUCKETS, float("inf")), series[2:], strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric([route, str(status)], buckets, sum_value=series[1])
        yield latency


class StateCollector(Collector):
    """Reads the components' own counters at scrape time. Each part reads its component's attributes
    (``intel.caches``, ``limiter.stats()``, ``intel.feed_health()``...) with ``getattr`` and a default, so a
    component that is absent (rate limits off) simply exports no series."""

    def __init__(self, intel: Any, *, limiter: Any = None, watcher: Any = None) -> None:
        self.intel = intel
        self.limiter = limiter
        self.watcher = watcher

    def collect(self) -> Iterable[Metric]:
        parts = (
            self._info,
            self._upstreams,
            self._caches,
            self._limiter,
            self._shared,
            self._feeds,
            self._dnsbls,
            self._databases,
        )
        for part in parts:
            try:
                yield from part()
            except Exception:  # one broken component must not hide every other series
                log.exception("collecting metrics from %s failed", part.__name__.lstrip("_"))

    def _info(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("ipintel_build_info", "The running version (always 1).", labels=["version"])
        info.add_metric([__version__], 1)
        yield info

    def _upstreams(self) -> Iterator[Metric]:
        calls = getattr(getattr(self.intel, "upstream_stats", None), "calls", None)  # Counter[(source, outcome)]
        if not isinstance(calls, Mapping):
            return
        family = CounterMetricFamily(
            "ipintel_upstream_calls", "Calls to upstreams, by source and outcome.", labels=["source", "outcome"]
        )
        for (source, outcome), count in sorted(calls.items()):
            family.add_metric([source, outcome], count)
        yield family

    def _caches(self) -> Iterator[Metric]:
        caches = getattr(self.intel, "caches", None)  # name -> an object whose stats() gives the keys of _CACHE_STATS
        if not isinstance(caches, Mapping):
            return
        yield from _stat_families(
            "cache", ((name, _stats_of(cache)) for name, cache in sorted(caches.items())), _CACHE_STATS
        )

    def _limiter(self) -> Iterator[Metric]:
        limiter = self.limiter
        if limiter is None:
            return
        stats = _stats_of(limiter)
        if not stats:
            rejections = getattr(limiter, "rejections", None)
            if isinstance(rejections, Mapping):
                stats = {quota: {"rejections": count} for quota, count in rejections.items()}
        # The label is "scope", the quotas' public name (docs/API.md#rate-limits).
        by_quota = ((quota, values) for quota, values in sorted(stats.items()) if isinstance(values, Mapping))
        yield from _stat_families("scope", by_quota, _QUOTA_STATS)

    def _shared(self) -> Iterator[Metric]:
        """Redis (``IPINTEL_REDIS_URL``): no series when it is not configured."""
        stats = _stats_of(getattr(self.intel, "shared", None))
        if not stats:
            return
        up = GaugeMetricFamily(
            "ipintel_redis_up",
            "1 while Redis answers (shared caches and rate limits in use), 0 while the service falls back to "
            "in-process state.",
        )
        up.add_metric([], stats.get("up", 0))
        operations = CounterMetricFamily(
            "ipintel_redis_operations", "Operations sent to Redis, by operation.", labels=["operation"]
        )
        for operation, count in sorted(stats.get("operations", {}).items()):
            operations.add_metric([operation], count)
        failures = CounterMetricFamily(
            "ipintel_redis_failures",
            "Redis operations that failed or timed out (each fell back to in-process state), by operation and reason.",
            labels=["operation", "reason"],
        )
        for (operation, reason), count in sorted(stats.get("failures", {}).items()):
            failures.add_metric([operation, reason], count)
        bypassed = CounterMetricFamily(
            "ipintel_redis_bypassed",
            "Operations not sent to Redis during its back-off after a failure, by operation.",
            labels=["operation"],
        )
        for operation, count in sorted(stats.get("bypassed", {}).items()):
            bypassed.add_metric([operation], count)
        yield from (up, operations, failures, bypassed)

    def _feeds(self) -> Iterator[Metric]:
        feed_health = getattr(self.intel, "feed_health", None)
        if not callable(feed_health):
            return
        health = feed_health()
        age = GaugeMetricFamily(
            "ipintel_feed_age_seconds", "Seconds since the loaded copy of a feed was downloaded.", labels=["feed"]
        )
        prefixes = GaugeMetricFamily("ipintel_feed_prefixes", "Prefixes in the loaded copy of a feed.", labels=["feed"])
        status = GaugeMetricFamily(
            "ipintel_feed_status",
            "1 for the state a feed is in (ok, stale, missing, disabled).",
            labels=["feed", "status"],
        )
        for name, entry in sorted(health.items()):
            if not isinstance(entry, Mapping):
                continue
            if isinstance(entry.get("ageSeconds"), int | float):
                age.add_metric([name], entry["ageSeconds"])
            if isinstance(entry.get("prefixes"), int):
                prefixes.add_metric([name], entry["prefixes"])
            if entry.get("status"):
                status.add_metric([name, str(entry["status"])], 1)
        yield from (age, prefixes, status)

    def _dnsbls(self) -> Iterator[Metric]:
        zones = getattr(self.intel, "dnsbl_zones", None)
        state_of = getattr(getattr(self.intel, "dnsbl_tests", None), "state", None)
        if zones is None or not callable(state_of):
            return
        family = GaugeMetricFamily(
            "ipintel_dnsbl_self_test",
            "1 for the latest conclusive RFC 5782 self-test verdict of a DNSBL zone (passed, failed, untested).",
            labels=["zone", "verdict"],
        )
        for zone in zones:
            state = state_of(zone)
            family.add_metric([zone.name, getattr(state, "verdict", None) or "untested"], 1)
        yield family

    def _databases(self) -> Iterator[Metric]:
        databases = getattr(self.intel, "databases", None)
        if databases is not None:
            labels = ["kind", "path"]  # several files may serve one kind (IPv4 and IPv6 published apart)
            built = GaugeMetricFamily(
                "ipintel_geoip_database_build_timestamp_seconds",
                "When the loaded .mmdb file was built (its metadata's build_epoch).",
                labels=labels,
            )
            age = GaugeMetricFamily(
                "ipintel_geoip_database_age_seconds", "Seconds since the loaded .mmdb file was built.", labels=labels
            )
            max_age = GaugeMetricFamily(
                "ipintel_geoip_database_max_age_seconds",
                "The age past which the .mmdb file is stale (IPINTEL_GEOIP_MAX_AGE, else twice its publisher's "
                "interval).",
                labels=labels,
            )
            stale = GaugeMetricFamily(
                "ipintel_geoip_database_stale", "1 when the loaded .mmdb file is older than its max age.", labels=labels
            )
            loaded = GaugeMetricFamily(
                "ipintel_geoip_database_loaded", "1 when the .mmdb file is loaded, else 0.", labels=labels
            )
            now = time.time()
            for db in databases.all():
                if db.absent:  # a default file not fetched: not configured, so no series
                    continue
                key = [db.kind, str(db.path)]
                loaded.add_metric(key, 1 if db.loaded else 0)
                max_age.add_metric(key, db.max_age)
                if db.build_epoch is not None:
                    built.add_metric(key, db.build_epoch)
                    age.add_metric(key, db.age(now) or 0.0)
                    stale.add_metric(key, 1 if db.stale(now) else 0)
            yield from (built, age, max_age, stale, loaded)
        reloads = getattr(self.watcher, "reloads", None)
        if isinstance(reloads, Mapping):
            family = CounterMetricFamily(
                "ipintel_geoip_database_reloads",
                "Attempts to reload a .mmdb file (SIGHUP or a change on disk), by outcome.",
                labels=["kind", "outcome"],
            )
            for (kind, outcome), count in sorted(reloads.items()):
                family.add_metric([kind, outcome], count)
            yield family


# A statistic a component reports by name, as one series family: (key in its stats(), family, metric name, help).
_Stat = tuple[str, type[CounterMetricFamily] | type[GaugeMetricFamily], str, str]

_CACHE_STATS: tuple[_Stat, ...] = (
    ("hits", CounterMetricFamily, "ipintel_cache_hits", "Lookups answered from the cache."),
    ("misses", CounterMetricFamily, "ipintel_cache_misses", "Lookups that started a load (cache misses)."),
    (
        "coalesced",
        CounterMetricFamily,
        "ipintel_cache_coalesced",
        "Lookups that joined a load already under way (single flight).",
    ),
    ("evictions", CounterMetricFamily, "ipintel_cache_evictions", "Entries pushed out to make room."),
    (
        "shared_hits",
        CounterMetricFamily,
        "ipintel_cache_shared_hits",
        "Local misses answered from the shared cache in Redis (IPINTEL_REDIS_URL) instead of the upstream.",
    ),
    ("entries", GaugeMetricFamily, "ipintel_cache_entries", "Entries held now."),
    ("max_entries", GaugeMetricFamily, "ipintel_cache_max_entries", "Entries the cache may hold."),
)

_QUOTA_STATS: tuple[_Stat, ...] = (
    (
        "rejections",
        CounterMetricFamily,
        "ipintel_rate_limit_rejections",
        "Requests refused with 429, by rate-limit scope.",
    ),
    (
        "evictions",
        CounterMetricFamily,
        "ipintel_rate_limit_evictions",
        "Client buckets dropped because the tracked-client cap was reached.",
    ),
    ("tracked", GaugeMetricFamily, "ipintel_rate_limit_tracked_clients", "Clients with a partly spent bucket."),
    (
        "limit",
        GaugeMetricFamily,
        "ipintel_rate_limit_per_minute",
        "Requests per minute one client may make (per pod, or in all with IPINTEL_REDIS_URL).",
    ),
)


def _stat_families(
    label: str, components: Iterable[tuple[object, Mapping[str, Any]]], stats: Iterable[_Stat]
) -> list[Metric]:
    """One family per statistic of ``stats``, with a series (``label`` = the component's name) for each
    component of ``components`` (name, its ``stats()``) that reports the statistic as a number."""
    families = [(key, family(name, help_text, labels=[label])) for key, family, name, help_text in stats]
    for component, values in components:
        for key, family in families:
            value = values.get(key)
            if isinstance(value, int | float):
                family.add_metric([str(component)], value)
    return [family for _, family in families]


def _stats_of(component: Any) -> dict[str, Any]:
    """``component.stats()`` as a dict, or ``{}`` when it has none."""
    stats = getattr(component, "stats", None)
    if not callable(stats):
        return {}
    value = stats()
    return dict(value) if isinstance(value, Mapping) else {}


class ApiKeysCollector(Collector):
    """The API keys' series (IPINTEL_API_KEYS_FILE), read at scrape time: names only, never a key or a digest."""

    def __init__(self, keys: Any) -> None:
        self.keys = keys

    def collect(self) -> Iterator[Metric]:
        keys = self.keys
        loaded = GaugeMetricFamily("ipintel_api_keys", "API keys in force (IPINTEL_API_KEYS_FILE).")
        loaded.add_metric([], len(keys.names))
        yield loaded
        requests = CounterMetricFamily(
            "ipintel_api_key_requests", "Requests accepted with an API key, by the key's name.", labels=["key"]
        )
        for name, count in sorted(keys.requests.items()):
            requests.add_metric([name], count)
        yield requests
        refusals = CounterMetricFamily(
            "ipintel_api_key_refusals",
            "Requests refused 401: no key (missing), a malformed header, or a key not in force (invalid).",
            labels=["reason"],
        )
        for reason in ("missing", "malformed", "invalid"):
            refusals.add_metric([reason], keys.refusals[reason])
        yield refusals
        reloads = CounterMetricFamily(
            "ipintel_api_key_file_reloads", "Loads of a new API key file, by outcome.", labels=["outcome"]
        )
        for outcome in ("ok", "error", "removed"):
            reloads.add_metric([outcome], keys.reloads[outcome])
        yield reloads
