"""Fuzzing from the contract: schemathesis drives every operation of /openapi.json
against the real server process, pointed at the local fake internet.

Every response must be documented: its status code, its content type, its
body against the schema, its headers; no 500 and no hang (a request has 10 s,
and the server must still be running afterwards). ``make test`` runs a
bounded number of examples per operation; ``make fuzz`` runs many more
(``IPINTEL_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.support.app import server_process
from tests.support.fake_internet import FakeInternet

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

from schemathesis.checks import positive_data_acceptance  # noqa: E402

EXAMPLES = int(os.environ.get("IPINTEL_FUZZ_EXAMPLES", "10"))


@pytest.fixture(scope="module")
def fuzz_server(city_db: Path, asn_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Popen]]:
    with FakeInternet() as net:
        env = {
            **net.env,
            "IPINTEL_GEOIP_CITY_DB": str(city_db),
            "IPINTEL_GEOIP_ASN_DB": str(asn_db),
            "IPINTEL_DATA_DIR": str(tmp_path_factory.mktemp("fuzz-data")),
            "IPINTEL_RATE_LIMITS": "off",
            "IPINTEL_LOG_LEVEL": "WARNING",
        }
        with server_process(env) as (client, proc):
            yield str(client.base_url).rstrip("/"), proc


@pytest.fixture(scope="module")
def api_schema(fuzz_server: tuple[str, Popen]):  # type: ignore[no-untyped-def]
    url, _proc = fuzz_server
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_every_operation_keeps_its_contract(api_schema, fuzz_server: tuple[str, Popen]) -> None:  # type: ignore[no-untyped-def]
    """Each operation in turn, ``EXAMPLES`` generated cases each (valid and invalid
    inputs alike), every response checked by schemathesis's checks."""
    from hypothesis import given

    url, proc = fuzz_server
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10, [op.label for op in operations]
    calls = 0
    for operation in operations:

        @given(case=operation.as_strategy())
        @hypothesis_settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=os.environ.get("IPINTEL_FUZZ_RANDOM") != "1",
            database=None,
        )
        def check(case) -> None:  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            # positive_data_acceptance is left out: a schema-valid string is not a
            # valid address, and a valid address may be reserved (400/422 are the
            # documented answers); every other check applies.
            case.call_and_validate(base_url=url, timeout=10, excluded_checks=[positive_data_acceptance])

        try:
            check()
        except Exception as exc:
            raise AssertionError(f"{operation.label}: {exc}") from exc
        assert proc.poll() is None, f"the server died during {operation.label}"
    assert calls >= len(operations) * 2, f"only {calls} cases ran"
    print(f"{calls} cases over {len(operations)} operations")
