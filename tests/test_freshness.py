"""Freshness you can see (docs/CONFIGURATION.md#freshness): each database's build date and age in /readyz,
/metrics and the page's footer, ``stale`` past its max age (still ready), warned at start and once a day.

The old file is real: DB-IP City Lite of April 2023 (tests/support/real_databases.py); the fresh one is
written by the tests now (tests/support/mmdb.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from ipintel.infra.mmdb import GeoDatabases
from ipintel.infra.reload import STALE_WARNING_INTERVAL, DatabaseWatcher
from ipintel.settings import ConfigError, Settings
from tests.support.app import running_app, validator
from tests.support.real_databases import real_database

HEALTH = validator("health")


@pytest.fixture
def old_city() -> Path:
    return real_database("dbip-lite", "dbip-city-lite-latest.mmdb")


async def test_an_old_database_is_stale_but_ready(
    settings: Settings, old_city: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ipintel.service"):
        async with running_app(settings.replace(geoip_city_db=old_city)) as client:
            ready = await client.get("/readyz")
            answer = await client.get("/ip/8.8.8.8")
    assert ready.status_code == 200 and answer.status_code == 200
    body = ready.json()["data"]
    HEALTH.validate(body)
    city, asn = body["checks"]["geoip_city"], body["checks"]["geoip_asn"]
    assert (city["status"], city["databaseType"], city["buildDate"], city["maxAgeDays"]) == (
        "stale",
        "DBIP-City-Lite",
        "2023-04-01",
        60,
    )
    assert city["ageDays"] > 600
    assert asn["status"] == "ok" and asn["maxAgeDays"] == 7  # GeoLite2-ASN, written just now
    warnings = [r.message for r in caplog.records if "stale" in r.message]
    assert len(warnings) == 1 and str(old_city) in warnings[0] and "2023-04-01" in warnings[0]


async def test_max_age_setting_replaces_the_publishers_interval(settings: Settings, old_city: Path) -> None:
    ten_years = Settings.from_env({"IPINTEL_GEOIP_MAX_AGE": "3650"}).geoip_max_age
    assert ten_years == 3650 * 86_400
    async with running_app(settings.replace(geoip_city_db=old_city, geoip_max_age=ten_years)) as client:
        check = (await client.get("/readyz")).json()["data"]["checks"]["geoip_city"]
    assert (check["status"], check["maxAgeDays"]) == ("ok", 3650)
    with pytest.raises(ConfigError, match="IPINTEL_GEOIP_MAX_AGE"):
        Settings.from_env({"IPINTEL_GEOIP_MAX_AGE": "two months"})


async def test_metrics_give_build_date_age_and_staleness(settings: Settings, old_city: Path) -> None:
    async with running_app(settings.replace(geoip_city_db=old_city)) as client:
        text = (await client.get("/metrics")).text
    labels = f'kind="city",path="{old_city}"'
    assert f"ipintel_geoip_database_build_timestamp_seconds{{{labels}}} 1.680308777e+09" in text
    assert f"ipintel_geoip_database_stale{{{labels}}} 1.0" in text
    assert f"ipintel_geoip_database_max_age_seconds{{{labels}}} 5.184e+06" in text  # 60 days
    age = next(line for line in text.splitlines() if line.startswith(f"ipintel_geoip_database_age_seconds{{{labels}}}"))
    assert float(age.rpartition(" ")[2]) > 600 * 86_400


async def test_the_page_footer_shows_the_datas_date(settings: Settings, old_city: Path) -> None:
    async with running_app(settings.replace(geoip_city_db=old_city)) as client:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ipintel.test") as browser:  # HTML
            page = await browser.get("/", headers={"Accept": "text/html"})
            again = await browser.get("/", headers={"Accept": "text/html", "If-None-Match": page.headers["etag"]})
    assert '<time id="data-date" datetime="2023-04-01">2023-04-01</time>' in page.text
    assert again.status_code == 304


def test_a_stale_file_is_warned_about_once_a_day(old_city: Path, caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    databases = GeoDatabases(old_city)
    databases.load()
    watcher = DatabaseWatcher(databases, interval=5, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="ipintel.reload"):
        assert watcher.warn_stale() == []  # the start warned (Intel.open_databases)
        now[0] += STALE_WARNING_INTERVAL - 1
        assert watcher.warn_stale() == []
        now[0] += 1
        assert [db.path for db in watcher.warn_stale()] == [old_city]
        assert watcher.warn_stale() == []
    assert len([r for r in caplog.records if "stale" in r.message]) == 1
    databases.close()
