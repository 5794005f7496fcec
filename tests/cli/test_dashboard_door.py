"""`venturi dashboard`'s doors (issue 36): a non-loopback address without a password
refuses to start unless told so, the Host allow-list and its --allowed-host option."""

from __future__ import annotations

import http.client
import signal
from pathlib import Path

import venturi
from tests.cli.conftest import Invoke, answers, free_port, start_cli_process
from tests.support import wait_until


def test_a_public_address_without_a_password_refuses_to_start(invoke: Invoke) -> None:
    refused = invoke("dashboard", "--bind", "0.0.0.0", "--port", "0")
    assert refused.exit_code != 0
    assert "--insecure-no-auth" in refused.output and "VENTURI_DASHBOARD_PASSWORD" in refused.output
    assert "Traceback" not in refused.output


def get(port: int, host: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/", headers={"Host": host})
        return connection.getresponse().status
    finally:
        connection.close()


def test_allowed_host_names_are_served_and_others_refused(
    queue: venturi.Queue, database_dsn: str, prefix: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
    args = ["dashboard", "--port", str(port), "--allowed-host", "ops.example"]
    args += ["--allowed-host", "queue.example:8443", "--max-connections", "8"]
    args += ["--read-timeout", "5"]
    log = tmp_path / "dashboard.log"
    process = start_cli_process(args, tmp_path, env, log)
    try:
        wait_until(lambda: answers(lambda: get(port, "localhost")), 30, what=f"the server {log}")
        assert get(port, f"127.0.0.1:{port}") == 200
        assert get(port, "ops.example") == 200
        assert get(port, "queue.example:8443") == 200
        assert get(port, "evil.example") == 400
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)


def test_insecure_no_auth_serves_a_public_address_and_says_so(
    queue: venturi.Queue, database_dsn: str, prefix: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
    args = ["dashboard", "--port", str(port), "--bind", "0.0.0.0", "--insecure-no-auth"]
    log = tmp_path / "dashboard.log"
    process = start_cli_process(args, tmp_path, env, log)
    try:
        wait_until(lambda: answers(lambda: get(port, "localhost")), 30, what=f"the server {log}")
        assert get(port, "localhost") == 200
        assert "without a password" in log.read_text()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
