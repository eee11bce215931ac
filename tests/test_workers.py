"""Several serving processes on one port (``IPINTEL_WORKERS``; ipintel/supervisor.py, docs/DEPLOYMENT.md#scaling-one-process-one-machine-a-fleet).

Run on the real server: the supervisor, its workers and the signals between
them are processes, not an ASGI app. Which worker answered a connection is
read from the kernel (``/proc``): the worker whose file table holds the
server side of that TCP connection, so nothing in the service has to say it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ipintel.settings import ConfigError, Settings
from tests.support.app import ROOT, server_process, settings_env, sigterm_with_a_request_in_flight, wait_for
from tests.support.dns_server import DnsServer
from tests.support.mmdb import city_record, write_city_db

OLD = {"8.8.8.0/24": city_record(country="US", city="Mountain View", time_zone="America/Los_Angeles")}
NEW = {"8.8.8.0/24": city_record(country="CH", city="Zurich", time_zone="Europe/Zurich")}

pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads the process and socket tables of /proc"
)


def env_for(city: Path, **extra: str) -> dict[str, str]:
    return {
        "IPINTEL_GEOIP_CITY_DB": str(city),
        "IPINTEL_WORKERS": "2",
        "IPINTEL_RATE_LIMITS": "off",  # several workers with limits need Redis (test below)
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_DNS_TIMEOUT": "0.5",
        "IPINTEL_DNSBL_ZONES": "bl.invalid",
        **extra,
    }


@pytest.fixture
def city(tmp_path: Path) -> Path:
    return write_city_db(tmp_path / "city.mmdb", OLD)


# What the kernel knows -----------------------------------------------------------------------


def children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tcp_table() -> list[tuple[int, int, str, int]]:
    """(local port, remote port, state, inode) of every IPv4 TCP socket on 127.0.0.1."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        local, remote, state, inode = parts[1], parts[2], parts[3], int(parts[9])
        if local.startswith("0100007F:"):
            rows.append((int(local.split(":")[1], 16), int(remote.split(":")[1], 16), state, inode))
    return rows


def listening(port: int) -> int:
    """How many sockets listen on ``port`` (one per worker: each has its own, with SO_REUSEPORT)."""
    return sum(1 for local, _, state, _ in _tcp_table() if local == port and state == "0A")


def socket_owner(inode: int, pids: set[int]) -> int | None:
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def answering_workers(port: int, workers: set[int], connections: int = 16) -> list[int | None]:
    """Open ``connections`` connections, ask ``GET /ip/8.8.8.8`` on each (it must answer 200),
    and return, for each, the worker process holding its server side."""
    socks = []
    try:
        for _ in range(connections):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            socks.append(sock)
            sock.sendall(b"GET /ip/8.8.8.8 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200 "), head[:200]
        table = _tcp_table()
        owners = []
        for sock in socks:  # still open: the server side is in the table, in a worker's files
            client_port = sock.getsockname()[1]
            inode = next(i for local, remote, _, i in table if local == port and remote == client_port)
            owners.append(socket_owner(inode, workers))
        return owners
    finally:
        for sock in socks:
            sock.close()


def city_on_a_fresh_connection(base: httpx.URL) -> str:
    with httpx.Client(base_url=base, timeout=10) as fresh:  # a new connection: any worker may take it
        response = fresh.get("/ip/8.8.8.8")
    assert response.status_code == 200, response.text
    return str(response.json()["data"]["city"])


def replace_db(target: Path, networks: dict[str, dict[str, object]]) -> None:
    fresh = write_city_db(target.with_name(f".new-{time.monotonic_ns()}.mmdb"), networks)
    os.replace(fresh, target)


def output_of(proc: subprocess.Popen[bytes]) -> str:
    return proc.stdout.read().decode() if proc.stdout else ""


# The tests -----------------------------------------------------------------------------------


def test_two_workers_share_the_port_and_both_answer(city: Path) -> None:
    with server_process(env_for(city)) as (client, proc):
        port = client.base_url.port
        assert port is not None
        assert wait_for(lambda: listening(port) == 2, timeout=30), "both workers listen"
        workers = children(proc.pid)
        assert len(workers) == 2, "the supervisor's two workers"
        assert client.get("/ip/8.8.8.8").status_code == 200  # the answer, checked against its schema
        owners = answering_workers(port, workers)
        assert None not in owners, "every connection is served by a worker, none by the supervisor"
        assert set(owners) == workers, f"the connections are spread over both workers: {owners}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        output = output_of(proc)
    for index in (1, 2):
        assert f'"message": "worker {index} of 2 (pid ' in output
    assert '"logger": "ipintel.access"' in output, "the access lines of the workers"


def test_one_worker_is_one_process_without_a_supervisor(city: Path) -> None:
    with server_process(env_for(city, IPINTEL_WORKERS="1")) as (client, proc):
        assert client.get("/ip/8.8.8.8").status_code == 200
        assert children(proc.pid) == set()
        port = client.base_url.port
        assert port is not None
        assert set(answering_workers(port, {proc.pid}, connections=2)) == {proc.pid}


def test_sigterm_drains_every_worker_then_exits_0(city: Path, dns: DnsServer) -> None:
    dns.add("slow.example", "A", "192.0.2.10", ttl=0)
    dns.slow("slow.example", 1.5)
    env = env_for(city, IPINTEL_DNS_SERVERS=dns.env, IPINTEL_DNS_TIMEOUT="10")
    with server_process(env) as (client, proc):
        port = client.base_url.port
        assert port is not None
        assert wait_for(lambda: listening(port) == 2, timeout=30)
        workers = children(proc.pid)
        answer = sigterm_with_a_request_in_flight(
            client, proc, "/dns/slow.example", lambda: dns.count("slow.example", "A") >= 1
        )
        output = output_of(proc)
    assert answer.status_code == 200
    assert not any(alive(pid) for pid in workers), "no worker outlives the supervisor"
    assert output.count("SIGTERM: draining") == 2, "each worker drained"
    assert "all workers stopped" in output


def test_sighup_reaches_every_worker(city: Path) -> None:
    # The watcher is slowed right down: only the signal can explain a reload.
    with server_process(env_for(city, IPINTEL_DB_CHECK_INTERVAL="600")) as (client, proc):
        port = client.base_url.port
        assert port is not None
        assert wait_for(lambda: listening(port) == 2, timeout=30)
        assert city_on_a_fresh_connection(client.base_url) == "Mountain View"
        replace_db(city, NEW)
        proc.send_signal(signal.SIGHUP)

        def every_connection_sees_the_new_file() -> bool:
            # 20 fresh connections, spread over the workers by the kernel: a worker left out
            # would be missed by all of them with a chance of 2^-20.
            return all(city_on_a_fresh_connection(client.base_url) == "Zurich" for _ in range(20))

        assert wait_for(every_connection_sees_the_new_file, timeout=10)
        assert proc.poll() is None, "SIGHUP does not stop the server"
        assert len(children(proc.pid)) == 2, "nor any worker"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        output = output_of(proc)
    reloads = [line for line in output.splitlines() if "SIGHUP: reloading the GeoIP databases" in line]
    assert sorted(line.split('"worker": ')[1].rstrip("}") for line in reloads) == ["1", "2"]


def test_a_worker_that_dies_is_restarted(city: Path) -> None:
    with server_process(env_for(city)) as (client, proc):
        port = client.base_url.port
        assert port is not None
        assert wait_for(lambda: listening(port) == 2, timeout=30)
        before = children(proc.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        assert wait_for(lambda: len(children(proc.pid) - before) == 1, timeout=10), "a new worker is started"
        workers = children(proc.pid)
        assert victim not in workers and len(workers) == 2
        # The dead worker's socket still listens (the supervisor holds it): the connections the kernel
        # gives it wait in its queue until the new worker, still starting, accepts them.
        assert set(answering_workers(port, workers)) == workers
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        output = output_of(proc)
    assert f"(pid {victim}) exited with status -9: restarting it" in output


def test_workers_stop_when_the_supervisor_is_killed(city: Path) -> None:
    with server_process(env_for(city)) as (client, proc):
        port = client.base_url.port
        assert port is not None
        assert wait_for(lambda: listening(port) == 2, timeout=30)
        workers = children(proc.pid)
        proc.kill()
        proc.wait(timeout=10)
        assert wait_for(lambda: not any(alive(pid) for pid in workers), timeout=10), "orphans drain and exit"
        assert listening(port) == 0


def test_the_server_runs_on_asyncio_and_run_takes_uvloop_for_the_benchmark() -> None:
    """hypercorn's ``uvloop`` worker class was measured no faster on a quiet machine (bench/bench_workers.py),
    so the server runs on asyncio; the benchmark runs both, and the bare baseline, through
    :func:`ipintel.__main__.run`."""
    import asyncio

    uvloop = pytest.importorskip("uvloop", reason="uvloop is in the dev and bench extras")

    from ipintel.__main__ import hypercorn_config, run

    seen: list[type] = []

    async def record() -> None:
        seen.append(type(asyncio.get_running_loop()))

    config = hypercorn_config("127.0.0.1", 0)
    assert config.worker_class == "asyncio"
    run(record(), config)
    config.worker_class = "uvloop"
    run(record(), config)
    assert issubclass(seen[0], asyncio.SelectorEventLoop) and seen[1] is uvloop.Loop


def run_main(env_vars: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = settings_env({"IPINTEL_HOST": "127.0.0.1", "IPINTEL_PORT": "0", **env_vars})
    return subprocess.run(
        [sys.executable, "-m", "ipintel"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_several_workers_with_rate_limits_and_no_redis_are_refused(city: Path) -> None:
    done = run_main({**env_for(city), "IPINTEL_RATE_LIMITS": "general=60"})
    assert done.returncode == 2
    message = done.stderr
    assert "ipintel: configuration error: IPINTEL_WORKERS=2 with rate limits on needs IPINTEL_REDIS_URL" in message
    assert "each worker keeps its own rate-limit buckets" in message and "up to 2 times its limit" in message
    assert "set IPINTEL_REDIS_URL" in message and "IPINTEL_RATE_LIMITS=off" in message
    assert "worker 1" not in message, "no worker started"


@pytest.mark.parametrize(
    ("env", "workers"),
    [
        ({"IPINTEL_WORKERS": "2", "IPINTEL_RATE_LIMITS": "off"}, 2),
        ({"IPINTEL_WORKERS": "64", "IPINTEL_REDIS_URL": "redis://127.0.0.1:6379/0"}, 64),
        ({"IPINTEL_WORKERS": "1"}, 1),  # one worker keeps the limits exact: no store needed
        ({"IPINTEL_WORKERS": " "}, 1),
        ({}, 1),
    ],
)
def test_workers_setting(env: dict[str, str], workers: int) -> None:
    assert Settings.from_env(env).workers == workers


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "IPINTEL_WORKERS: 0 is outside 1..64"),
        ("65", "IPINTEL_WORKERS: 65 is outside 1..64"),
        ("two", "IPINTEL_WORKERS: 'two' is not a whole number"),
        ("auto", "IPINTEL_WORKERS: 'auto' is not a whole number"),
    ],
)
def test_a_bad_workers_value_is_a_configuration_error(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"IPINTEL_WORKERS": value, "IPINTEL_RATE_LIMITS": "off"})
    assert str(raised.value) == message


def test_a_bad_workers_value_stops_the_start_with_status_2(city: Path) -> None:
    done = run_main({**env_for(city), "IPINTEL_WORKERS": "0"})
    assert done.returncode == 2
    assert "ipintel: configuration error: IPINTEL_WORKERS: 0 is outside 1..64" in done.stderr


def test_a_configuration_error_found_by_the_app_stops_the_start_before_any_worker(city: Path) -> None:
    done = run_main({**env_for(city), "IPINTEL_DNSBL_ZONES": "not a zone"})
    assert done.returncode == 2
    assert "configuration error: IPINTEL_DNSBL_ZONES: 'not a zone' is not a DNS zone name" in done.stderr
    assert "worker 1" not in done.stderr and "supervisor" not in done.stderr


def test_a_port_another_process_listens_on_with_so_reuseport_is_in_use(city_db: Path) -> None:
    """Issue 23, point 8: SO_REUSEPORT let the supervisor bind beside another process's listener on the same
    port (same user, SO_REUSEPORT too) and share its connections; the docs promise "a port in use is reported
    at once"."""
    from ipintel.supervisor import listening_sockets

    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(OSError) as refused:
            listening_sockets("127.0.0.1", port, 2)
        assert refused.value.errno == 98  # EADDRINUSE
        env = settings_env(
            {"IPINTEL_GEOIP_CITY_DB": str(city_db), "IPINTEL_WORKERS": "2", "IPINTEL_RATE_LIMITS": "off"}
            | {"IPINTEL_HOST": "127.0.0.1", "IPINTEL_PORT": str(port)}
        )
        proc = subprocess.run([sys.executable, "-m", "ipintel"], cwd=ROOT, env=env, capture_output=True, timeout=60)
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert b"in use" in proc.stdout + proc.stderr
    # A free port is bound as before, every socket on the same port.
    sockets = listening_sockets("127.0.0.1", 0, 2)
    try:
        assert len({s.getsockname()[1] for s in sockets}) == 1
    finally:
        for sock in sockets:
            sock.close()
