"""`venturi dashboard`: serves the dashboard on 127.0.0.1 by default, asks for the
password from the environment, and refuses actions with --read-only."""

from __future__ import annotations

import base64
import signal
import urllib.error
import urllib.request
from pathlib import Path

import venturi
from tests.cli.conftest import answers, free_port, start_cli_process
from tests.support import wait_until


def fetch(url: str, password: str | None = None, data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data)
    if password is not None:
        token = base64.b64encode(f"ops:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_dashboard_command_serves_with_a_password_and_read_only(
    queue: venturi.Queue, database_dsn: str, prefix: str, tmp_path: Path
) -> None:
    queue.enqueue("ok", {"n": 1})
    port = free_port()
    env = {
        "VENTURI_DSN": database_dsn,
        "VENTURI_PREFIX": prefix,
        "VENTURI_DASHBOARD_PASSWORD": "open sesame",
    }
    log = tmp_path / "dashboard.log"
    process = start_cli_process(
        ["dashboard", "--port", str(port), "--read-only"], tmp_path, env, log
    )
    try:
        url = f"http://127.0.0.1:{port}"
        status, _ = wait_until(lambda: answers(lambda: fetch(url + "/")), 30, what="the server")
        assert status == 401
        status, html = fetch(url + "/", "open sesame")
        assert status == 200 and 'data-kind="ok"' in html and 'id="read-only"' in html
        status, text = fetch(url + "/kinds/pause", "open sesame", data=b"kind=ok")
        assert status == 403 and "read-only" in text
        assert queue.paused() == set()
        assert f"venturi dashboard (read-only) on http://127.0.0.1:{port}/" in log.read_text()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
