from __future__ import annotations

from pathlib import Path

import pytest

from ipintel.settings import Settings
from tests.support.mmdb import write_asn_db, write_city_db


@pytest.fixture(scope="session")
def city_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_city_db(tmp_path_factory.mktemp("mmdb") / "city.mmdb")


@pytest.fixture(scope="session")
def asn_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_asn_db(tmp_path_factory.mktemp("mmdb") / "asn.mmdb")


@pytest.fixture
def settings(tmp_path: Path, city_db: Path, asn_db: Path) -> Settings:
    """Settings for a test: fixture databases, no network anywhere, no rate limits.

    Every upstream points at a closed local port unless a test gives it a
    local server, so nothing can leave the machine."""
    return Settings(
        data_dir=tmp_path / "data",
        geoip_city_db=city_db,
        geoip_asn_db=asn_db,
        dns_servers=(("127.0.0.1", 9),),
        dns_timeout=0.5,
        reputation_url="http://127.0.0.1:9/api",
        rdap_bootstrap_url="http://127.0.0.1:9/rdap/",
        upstream_timeout=1.0,
        feeds_enabled=False,
        rate_limits=None,
        log_format="text",
    )
