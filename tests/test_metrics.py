"""GET /metrics: the Prometheus exposition, parsed, after real requests through the app."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import maxminddb
import pytest
from prometheus_client.parser import text_string_to_metric_families

import ipintel
from ipintel.infra.feed_catalogue import FEED_NAMES
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import answers_everything, healthy_list
from tests.support.feeds import FeedServer, wait_for_feeds

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def series(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for (n, labels) in samples if n == name]


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200
    return parse(response.text)


@pytest.fixture
def dns(dns: DnsServer) -> DnsServer:
    dns.add("example.com", "A", "93.184.215.14", ttl=0)
    return dns


async def test_requests_are_counted_by_route_template_and_status(settings: Settings) -> None:
    async with running_app(settings) as client:
        for ip in ("8.8.8.8", "8.8.8.8", "81.2.69.142"):
            assert (await client.get(f"/ip/{ip}")).status_code == 200
        assert (await client.get("/ip/10.0.0.1")).status_code == 422
        assert (await client.get("/cidr", params={"range": "192.168.1.77/24"})).status_code == 200
        assert (await client.get("/no/such/route")).status_code == 404
        assert (await client.post("/ip/8.8.8.8")).status_code == 405
        samples = await scrape(client)
        again = await scrape(client)

    requests = "ipintel_http_requests_total"
    assert value(samples, requests, method="GET", route="/ip/{ip}", status="200") == 3
    assert value(samples, requests, method="GET", route="/ip/{ip}", status="422") == 1
    assert value(samples, requests, method="GET", route="/cidr", status="200") == 1
    assert value(samples, requests, method="GET", route="unmatched", status="404") == 1
    assert value(samples, requests, method="POST", route="/ip/{ip}", status="405") == 1
    # The scrape itself is counted once it has answered: the second scrape sees the first.
    assert value(again, requests, method="GET", route="/metrics", status="200") == 1

    histogram = "ipintel_http_request_duration_seconds"
    assert value(samples, f"{histogram}_count", route="/ip/{ip}", status="200") == 3
    assert value(samples, f"{histogram}_bucket", route="/ip/{ip}", status="200", le="+Inf") == 3
    assert (value(samples, f"{histogram}_sum", route="/ip/{ip}", status="200") or 0) > 0
    buckets = sorted(
        (float(labels["le"]), samples[(f"{histogram}_bucket", frozenset(labels.items()))])
        for labels in series(samples, f"{histogram}_bucket")
        if labels["route"] == "/ip/{ip}" and labels["status"] == "200"
    )
    assert [count for _, count in buckets] == sorted(count for _, count in buckets), "buckets are cumulative"

    # Label values are templates: no looked-up address, no raw path, ever.
    for _name, labels in samples:
        for label_value in dict(labels).values():
            assert "8.8.8.8" not in label_value and "10.0.0.1" not in label_value and "no/such" not in label_value


async def test_cache_hits_misses_and_evictions(settings: Settings) -> None:
    async with running_app(settings.replace(cache_max_entries=1)) as client:
        for ip in ("8.8.8.8", "8.8.8.8", "81.2.69.142", "8.8.4.4"):
            assert (await client.get(f"/ip/{ip}")).status_code == 200
        samples = await scrape(client)
    assert value(samples, "ipintel_cache_hits_total", cache="geoip") == 1
    assert value(samples, "ipintel_cache_misses_total", cache="geoip") == 3
    assert value(samples, "ipintel_cache_evictions_total", cache="geoip") == 2  # room for one entry
    assert value(samples, "ipintel_cache_entries", cache="geoip") == 1
    assert value(samples, "ipintel_cache_max_entries", cache="geoip") == 1
    assert {labels["cache"] for labels in series(samples, "ipintel_cache_hits_total")} >= {"geoip", "dns", "whois"}


async def test_rate_limit_rejections_by_scope_and_metrics_is_never_limited(settings: Settings) -> None:
    limited = settings.replace(rate_limits={"general": 2, "dns": 30, "registry": 10})
    async with running_app(limited) as client:
        statuses = [(await client.get("/cidr", params={"range": "10.0.0.0/8"})).status_code for _ in range(3)]
        scrapes = [await client.get("/metrics") for _ in range(5)]
    assert statuses == [200, 200, 429]
    assert [r.status_code for r in scrapes] == [200] * 5, "/metrics is not rate limited"
    assert "ratelimit-limit" not in scrapes[0].headers
    samples = parse(scrapes[-1].text)
    assert value(samples, "ipintel_rate_limit_rejections_total", scope="general") == 1
    assert value(samples, "ipintel_rate_limit_rejections_total", scope="dns") == 0
    assert value(samples, "ipintel_rate_limit_per_minute", scope="general") == 2
    # A 429 is answered before routing, yet it is counted under the route it was meant for.
    assert value(samples, "ipintel_http_requests_total", method="GET", route="/cidr", status="429") == 1


async def test_no_limiter_series_when_rate_limits_are_off(settings: Settings) -> None:
    async with running_app(settings) as client:  # the fixture turns rate limits off
        samples = await scrape(client)
    assert series(samples, "ipintel_rate_limit_rejections_total") == []
    assert value(samples, "ipintel_build_info", version=ipintel.__version__) == 1


async def test_upstream_calls_by_source_and_outcome_with_latency(settings: Settings, dns: DnsServer) -> None:
    dns.servfail("broken.example")
    async with running_app(settings.replace(dns_servers=dns.servers)) as client:
        assert (await client.get("/dns/example.com")).status_code == 200
        assert (await client.get("/dns/broken.example")).status_code == 502
        samples = await scrape(client)
    calls = "ipintel_upstream_calls_total"
    seconds = "ipintel_upstream_call_duration_seconds"
    ok = value(samples, calls, source="dns", outcome="ok")
    assert ok is not None and ok >= 1
    failures = [labels for labels in series(samples, calls) if labels["source"] == "dns" and labels["outcome"] != "ok"]
    assert failures, "the SERVFAIL is counted under an outcome other than ok"
    # Every counted call was also timed: the histogram's count matches the counter.
    for labels in series(samples, calls):
        assert value(samples, f"{seconds}_count", **labels) == value(samples, calls, **labels)


async def test_database_build_dates_and_feed_states(settings: Settings, city_db: Path, asn_db: Path) -> None:
    async with running_app(settings) as client:
        samples = await scrape(client)
    for kind, path in (("city", city_db), ("asn", asn_db)):
        with maxminddb.open_database(str(path)) as reader:
            built = reader.metadata().build_epoch
        file = {"kind": kind, "path": str(path)}
        assert value(samples, "ipintel_geoip_database_build_timestamp_seconds", **file) == built
        assert value(samples, "ipintel_geoip_database_loaded", **file) == 1
        # Written by the test just now: seconds old, far from its max age (GeoLite2: 7 days), so not stale.
        age = value(samples, "ipintel_geoip_database_age_seconds", **file)
        assert age is not None and 0 <= age < 3600
        assert value(samples, "ipintel_geoip_database_max_age_seconds", **file) == 7 * 86_400
        assert value(samples, "ipintel_geoip_database_stale", **file) == 0
    states = series(samples, "ipintel_feed_status")
    assert sorted(labels["feed"] for labels in states) == sorted(FEED_NAMES), "one state per feed"
    assert all(value(samples, "ipintel_feed_status", **labels) == 1 for labels in states)


async def test_exposition_formats_and_no_caching(settings: Settings) -> None:
    async with running_app(settings) as client:
        text = await client.get("/metrics")
        openmetrics = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert text.headers["cache-control"] == "no-store"
    assert text.headers.get("x-request-id")
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")
    # Process figures come with it (Linux): the resident memory the manifests are sized on.
    assert value(parse(text.text), "process_resident_memory_bytes") is not None


async def test_each_app_has_its_own_registry(settings: Settings) -> None:
    async with running_app(settings) as first, running_app(settings) as second:
        await first.get("/cidr", params={"range": "10.0.0.0/8"})
        one = await scrape(first)
        two = await scrape(second)
    assert value(one, "ipintel_http_requests_total", method="GET", route="/cidr", status="200") == 1
    assert value(two, "ipintel_http_requests_total", method="GET", route="/cidr", status="200") is None


async def test_metrics_is_documented_in_openapi(settings: Settings) -> None:
    async with running_app(settings) as client:
        document = (await client.get("/openapi.json")).json()
    assert "text/plain" in document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


async def test_feed_ages_and_feed_downloads_once_feeds_are_loaded(settings: Settings, feed_server: FeedServer) -> None:
    with_feeds = settings.replace(feeds_enabled=True, feed_urls=feed_server.feed_urls())
    async with running_app(with_feeds) as client:
        await wait_for_feeds(client, "ok")
        samples = await scrape(client)
    for name in FEED_NAMES:
        age = value(samples, "ipintel_feed_age_seconds", feed=name)
        assert age is not None and 0 <= age < 60, name
        assert (value(samples, "ipintel_feed_prefixes", feed=name) or 0) > 0, name
        assert value(samples, "ipintel_feed_status", feed=name, status="ok") == 1, name
        downloads = value(samples, "ipintel_upstream_calls_total", source=f"feed:{name}", outcome="ok")
        assert downloads is not None and downloads >= 1, name
        timed = value(samples, "ipintel_upstream_call_duration_seconds_count", source=f"feed:{name}", outcome="ok")
        assert timed == downloads, name


async def test_dnsbl_self_test_verdicts(settings: Settings, dns: DnsServer) -> None:
    healthy_list(dns, "good.example")
    answers_everything(dns, "dead.example", "127.0.0.2")  # lists even 127.0.0.1: fails RFC 5782
    zones = ("good.example", "dead.example")
    async with running_app(settings.replace(dns_servers=dns.servers, dnsbl_zones=zones)) as client:
        intel = client.app.state.intel
        async with asyncio.timeout(10):
            while any(intel.dnsbl_tests.state(zone) is None for zone in intel.dnsbl_zones):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        samples = await scrape(client)
    assert value(samples, "ipintel_dnsbl_self_test", zone="good.example", verdict="passed") == 1
    assert value(samples, "ipintel_dnsbl_self_test", zone="dead.example", verdict="failed") == 1
    assert len(series(samples, "ipintel_dnsbl_self_test")) == 2
