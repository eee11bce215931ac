from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from ipintel.settings import ConfigError, Settings


def test_defaults_serve_a_laptop() -> None:
    s = Settings.from_env({})
    assert (s.host, s.port) == ("127.0.0.1", 8080)
    assert s.city_db_path == Path("data/dbip-city-lite.mmdb")
    assert s.rate_limits == {"general": 60, "dns": 30, "registry": 10}
    assert s.dns_servers == () and s.feeds_enabled


def test_every_variable_is_read() -> None:
    s = Settings.from_env(
        {
            "IPINTEL_HOST": "0.0.0.0",
            "IPINTEL_PORT": "9000",
            "IPINTEL_DATA_DIR": "/var/lib/ipintel",
            "IPINTEL_GEOIP_CITY_DB": "/db/city.mmdb",
            "IPINTEL_GEOIP_ASN_DB": "/db/asn.mmdb",
            "IPINTEL_DNS_SERVERS": "127.0.0.1:5353, ::1, [2001:db8::53]:53, 9.9.9.9",
            "IPINTEL_DNS_TIMEOUT": "1.5",
            "IPINTEL_DNSBL_ZONES": "zen.spamhaus.org., bl.spamcop.net",
            "IPINTEL_RDAP_BOOTSTRAP_URL": "http://127.0.0.1:1/rdap",
            "IPINTEL_FEEDS": "off",
            "IPINTEL_FEED_URLS": "tor=http://127.0.0.1/tor.txt,aws=",
            "IPINTEL_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::1",
            "IPINTEL_RATE_LIMITS": "registry=5",
            "IPINTEL_LOG_FORMAT": "text",
        }
    )
    assert s.port == 9000 and s.host == "0.0.0.0"
    assert s.city_db_path == Path("/db/city.mmdb")
    assert s.dns_servers == (("127.0.0.1", 5353), ("::1", 53), ("2001:db8::53", 53), ("9.9.9.9", 53))
    assert s.dnsbl_zones == ("zen.spamhaus.org", "bl.spamcop.net")
    assert s.rdap_bootstrap_url == "http://127.0.0.1:1/rdap/"
    assert s.feed_urls == {"tor": "http://127.0.0.1/tor.txt", "aws": None}
    assert ipaddress.ip_address("10.1.2.3") in s.trusted_proxies[0]
    assert s.rate_limits == {"general": 60, "dns": 30, "registry": 5}
    assert not s.feeds_enabled and s.log_format == "text"
    assert Settings.from_env({"IPINTEL_RATE_LIMITS": "off"}).rate_limits is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("IPINTEL_PORT", "http"),
        ("IPINTEL_PORT", "70000"),
        ("IPINTEL_DNS_SERVERS", "dns.google"),
        ("IPINTEL_DNS_TIMEOUT", "-1"),
        ("IPINTEL_FEED_URLS", "nosuchfeed=http://x"),
        ("IPINTEL_TRUSTED_PROXIES", "10.0.0.0/33"),
        ("IPINTEL_RATE_LIMITS", "general=lots"),
        ("IPINTEL_FEEDS", "maybe"),
        ("IPINTEL_LOG_FORMAT", "xml"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({name: value})
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "auto"), ("", "auto"), ("auto", "auto"), ("Auto", "auto"), ("text", "text"), (" JSON ", "json")],
)
def test_log_format_is_auto_unless_told(value: str | None, expected: str) -> None:
    """Auto (text on a terminal, else JSON) is decided where the logs go, by logs.configure (tests/test_logs.py)."""
    env = {} if value is None else {"IPINTEL_LOG_FORMAT": value}
    assert Settings.from_env(env).log_format == expected
    assert Settings().log_format == "auto"


@pytest.mark.parametrize("value", ["xml", "jsonl", "tty", "1"])
def test_a_bad_log_format_is_refused_with_the_choices(value: str) -> None:
    with pytest.raises(ConfigError, match=r"IPINTEL_LOG_FORMAT must be 'text', 'json' or 'auto' .*, not '"):
        Settings.from_env({"IPINTEL_LOG_FORMAT": value})
