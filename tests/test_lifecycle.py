"""Process lifecycle (docs/API.md#operations): SIGTERM drains, SIGHUP and a replaced file reload the databases.

The signal tests run the real server (``python -m ipintel`` on hypercorn):
signals are a property of the process, not of the ASGI app.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ipintel.settings import Settings
from tests.support.app import running_app, server_process, sigterm_with_a_request_in_flight, wait_for
from tests.support.dns_server import DnsServer
from tests.support.mmdb import city_record, write_city_db

# The same address answered differently by the "old" and the "new" database.
OLD = {"8.8.8.0/24": city_record(country="US", city="Mountain View", time_zone="America/Los_Angeles")}
NEW = {"8.8.8.0/24": city_record(country="CH", city="Zurich", time_zone="Europe/Zurich")}


def replace_db(target: Path, networks: dict[str, dict[str, Any]]) -> None:
    """Write a new database beside ``target`` and rename it over, as scripts/fetch-geoip does."""
    fresh = write_city_db(target.with_name(f".new-{time.monotonic_ns()}.mmdb"), networks)
    os.replace(fresh, target)


def base_env(city: Path, **extra: str) -> dict[str, str]:
    return {
        "IPINTEL_GEOIP_CITY_DB": str(city),
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_DNS_TIMEOUT": "0.5",
        "IPINTEL_DNSBL_ZONES": "bl.invalid",
        **extra,
    }


def city_of(client: httpx.Client) -> str:
    response = client.get("/ip/8.8.8.8")
    assert response.status_code == 200, response.text
    return str(response.json()["data"]["city"])


@pytest.fixture
def city(tmp_path: Path) -> Path:
    return write_city_db(tmp_path / "city.mmdb", OLD)


@pytest.fixture
def slow_dns(dns: DnsServer) -> DnsServer:
    dns.add("slow.example", "A", "192.0.2.10", ttl=0)
    dns.slow("slow.example", 1.2)
    return dns


def test_sigterm_lets_the_request_in_flight_finish_then_exits_0(city: Path, slow_dns: DnsServer) -> None:
    # The DNS timeout is well above the upstream's delay: the request is slow, not failing.
    env = base_env(city, IPINTEL_DNS_SERVERS=slow_dns.env, IPINTEL_DNS_TIMEOUT="10")
    with server_process(env) as (client, proc):
        response = sigterm_with_a_request_in_flight(
            client, proc, "/dns/slow.example", lambda: slow_dns.count("slow.example", "A") >= 1
        )
        output = proc.stdout.read().decode() if proc.stdout else ""
    assert response.status_code == 200
    assert [r["data"] for r in response.json()["data"]["records"]] == ["192.0.2.10"]
    assert "SIGTERM: draining" in output


def test_sighup_reloads_a_replaced_database(city: Path) -> None:
    # The watcher is slowed right down: only the signal can explain the reload.
    with server_process(base_env(city, IPINTEL_DB_CHECK_INTERVAL="600")) as (client, proc):
        assert city_of(client) == "Mountain View"
        replace_db(city, NEW)
        time.sleep(0.3)
        assert "ipintel_geoip_database_reloads_total{" not in client.get("/metrics").text, "no reload yet"
        proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: city_of(client) == "Zurich", timeout=5.0)
        assert proc.poll() is None, "SIGHUP does not stop the server"


def test_a_database_replaced_on_disk_is_reloaded_without_dropping_a_request(city: Path) -> None:
    # Hundreds of requests: no access log, whose lines would fill the unread stdout pipe and block the server.
    env = base_env(city, IPINTEL_DB_CHECK_INTERVAL="0.1", IPINTEL_LOG_LEVEL="WARNING")
    with server_process(env) as (client, _proc):
        assert city_of(client) == "Mountain View"
        seen: list[tuple[int, str | None]] = []
        stop = threading.Event()

        def hammer() -> None:
            with httpx.Client(base_url=client.base_url, timeout=10) as own:
                while not stop.is_set():
                    response = own.get("/ip/8.8.8.8")
                    seen.append((response.status_code, response.json().get("data", {}).get("city")))

        worker = threading.Thread(target=hammer)
        worker.start()
        try:
            time.sleep(0.2)
            replace_db(city, NEW)
            assert wait_for(lambda: bool(seen) and seen[-1][1] == "Zurich", timeout=5.0)
        finally:
            stop.set()
            worker.join(timeout=10)
        metrics = client.get("/metrics").text
    assert seen and all(status == 200 for status, _ in seen), "no request failed during the reload"
    cities = [c for _, c in seen]
    first_new = cities.index("Zurich")
    assert set(cities[:first_new]) == {"Mountain View"} and set(cities[first_new:]) == {"Zurich"}
    assert 'ipintel_geoip_database_reloads_total{kind="city",outcome="ok"} 1.0' in metrics


async def test_a_broken_replacement_keeps_the_old_database_until_a_good_one_arrives(
    settings: Settings, city: Path
) -> None:
    app_settings = settings.replace(geoip_city_db=city, db_check_interval=0.05)
    async with running_app(app_settings) as client:

        async def city_now() -> str:
            response = await client.get("/ip/8.8.8.8")
            assert response.status_code == 200
            return str(response.json()["data"]["city"])

        async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
            for _ in range(int(timeout / 0.05)):
                if predicate():
                    return True
                await asyncio.sleep(0.05)
            return predicate()

        watcher = client.app.state.db_watcher
        assert await city_now() == "Mountain View"

        broken = city.with_name("broken.mmdb")
        broken.write_bytes(b"this is not a MaxMind database" * 100)
        os.replace(broken, city)
        assert await until(lambda: watcher.reloads[("city", "error")] == 1)
        assert await city_now() == "Mountain View", "the good reader stays"
        await asyncio.sleep(0.3)
        assert watcher.reloads[("city", "error")] == 1, "a bad file is tried once, not every interval"
        assert (await client.get("/readyz")).status_code == 200

        replace_db(city, NEW)
        assert await until(lambda: watcher.reloads[("city", "ok")] == 1)
        assert await city_now() == "Zurich"
