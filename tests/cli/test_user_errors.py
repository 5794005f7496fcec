"""Every user error of the `venturi` command is one line on stderr and a non-zero exit,
never a traceback (issue 36): malformed or hostile input, a bad --app target, bad ids,
durations and DSNs, unreachable databases; and a password on the command line is warned
about, since every local user can read a process's arguments."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import CLOSED_PORT_DSN

# A closed port with no password in it: the warning about passwords stays out of the way.
CLOSED_PORT = "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"


def venturi(
    *args: str, env: dict[str, str], stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`venturi ARGS` in a fresh interpreter: its stderr is exactly what a user sees,
    log lines from library threads included."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    return subprocess.run(
        [sys.executable, "-m", "venturi", *args],
        check=False,
        env={**inherited, "PYTHONPATH": os.getcwd(), **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def one_error(ran: subprocess.CompletedProcess[str], status: int | None = None) -> str:
    """The one line a failed command wrote on stderr; fails on a traceback, warnings or
    anything else there."""
    assert "Traceback" not in ran.stderr, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {ran.stderr!r}"
    assert lines[0].startswith("Error: "), lines[0]
    assert ran.returncode != 0
    if status is not None:
        assert ran.returncode == status, (ran.returncode, lines[0])
    return lines[0]


@pytest.fixture
def env(database_dsn: str, prefix: str) -> dict[str, str]:
    return {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "nests deeper than 64 levels"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 64 levels"),
        ('{"n": ' + "1" * 5000 + "}", "not valid JSON"),
        ("{bad", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
    ids=["nested-objects", "nested-arrays", "huge-integer", "malformed", "not-an-object"],
)
def test_a_payload_that_json_cannot_take_is_one_line(
    env: dict[str, str], payload: str, says: str
) -> None:
    ran = venturi("enqueue", "k", "-", env=env, stdin=payload)
    assert says in one_error(ran, status=2)


APP = textwrap.dedent(
    """
    import venturi

    def needs_arguments(config):
        return venturi.Queue()

    def broken():
        raise RuntimeError("no settings for the queue")

    def refuses():
        return venturi.Queue(prefix="Not-A-Prefix")
    """
)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("os:system", "calling system() to get the queue raised TypeError"),
        ("os:getcwd", "is a str, not a venturi.Queue"),
        ("os:path", "is a module, not a venturi.Queue"),
        ("user_app:needs_arguments", "raised TypeError"),
        ("user_app:broken", "raised RuntimeError: no settings for the queue"),
        ("user_app:refuses", "prefix 'Not-A-Prefix' must match"),
        ("user_app:missing", "module 'user_app' has no attribute 'missing'"),
        ("no_such_module_here", "cannot import 'no_such_module_here'"),
        ("exits_at_import", "SystemExit: this module calls sys.exit at import"),
        (":queue", "is not module:attribute"),
    ],
)
def test_an_app_target_that_is_no_queue_is_one_line(
    env: dict[str, str], tmp_path: Path, target: str, says: str
) -> None:
    (tmp_path / "user_app.py").write_text(APP)
    (tmp_path / "exits_at_import.py").write_text(
        "import sys\nsys.exit('this module calls sys.exit at import')\n"
    )
    ran = venturi("worker", "--app", target, env=env, cwd=tmp_path)
    assert says in one_error(ran)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["job", "not-an-id"], "is neither a ULID nor a UUID"),
        (["cancel", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ"], "is neither a ULID nor a UUID"),
        (["history", "--before", "x"], "is neither a ULID nor a UUID"),
        (["enqueue", "k", "--depends-on", "x"], "is neither a ULID nor a UUID"),
    ],
)
def test_a_bad_job_id_is_one_line(env: dict[str, str], args: list[str], says: str) -> None:
    assert says in one_error(venturi(*args, env=env), status=2)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cleanup", "--older-than", "5x"], "is not a duration"),
        (["cleanup", "--older-than", "-1"], "must be finite and not negative"),
        (["cleanup", "--older-than", "inf"], "must be finite and not negative"),
        (["enqueue", "k", "--delay", "1e308"], "more than"),
        (["enqueue", "k", "--at", "tomorrow"], "is not an ISO 8601 time"),
        (["enqueue", "k", "--at", "9999-12-31T23:59:59-14:00"], "outside the times"),
        (["worker", "--app", "os:getcwd", "--retention", "completed=5x"], "retention"),
    ],
)
def test_a_bad_duration_or_time_is_one_line(
    env: dict[str, str], args: list[str], says: str
) -> None:
    assert says in one_error(venturi(*args, env=env))


@pytest.mark.parametrize(
    "dsn", ["garbage!!", "postgresql://user:pw@[::1", "host=a port"], ids=["words", "uri", "kv"]
)
def test_a_dsn_that_is_no_connection_string_is_one_line(env: dict[str, str], dsn: str) -> None:
    for option in ("--dsn", "--read-dsn", "--listen-dsn"):
        given = {"--dsn": "VENTURI_DSN", "--read-dsn": "VENTURI_READ_DSN"}.get(option)
        extra = {given: dsn} if given else {}
        args = [] if given else [option, dsn]
        line = one_error(venturi(*args, "stats", env={**env, **extra}))
        assert "is not a valid connection string" in line and "pw" not in line


@pytest.mark.parametrize("option", ["--dsn", "--read-dsn", "--listen-dsn"])
def test_an_unreachable_database_is_one_line_whichever_dsn(
    env: dict[str, str], option: str
) -> None:
    # The read pool used to log four connection warnings before the error.
    variable = {"--dsn": "VENTURI_DSN", "--read-dsn": "VENTURI_READ_DSN"}
    extra = {variable[option]: CLOSED_PORT} if option in variable else {}
    args = [] if option in variable else [option, CLOSED_PORT]
    line = one_error(venturi(*args, "stats", env={**env, **extra}))
    assert "cannot connect to PostgreSQL" in line and "port=1" in line


def test_an_unknown_host_is_one_line(env: dict[str, str]) -> None:
    dsn = "host=no-such-host.invalid connect_timeout=2"
    line = one_error(venturi("stats", env={**env, "VENTURI_DSN": dsn}))
    assert "no-such-host.invalid" in line


@pytest.mark.parametrize(
    ("option", "variable"),
    [("--dsn", "VENTURI_DSN"), ("--read-dsn", "VENTURI_READ_DSN"), ("--listen-dsn", None)],
)
def test_a_password_on_the_command_line_is_warned_about(option: str, variable: str | None) -> None:
    ran = venturi(option, CLOSED_PORT_DSN, "sql", env={})
    warning = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, ran.stderr
    assert option in warning[0] and "ps" in warning[0]
    assert "passfile" in warning[0] and "service file" in warning[0]
    assert variable is None or variable in warning[0]
    assert "topsecret" not in ran.stderr + ran.stdout
    assert ran.returncode == 0  # `sql` needs no database: the warning is all it says


def test_no_warning_for_a_password_from_the_environment_or_a_dsn_without_one() -> None:
    from_env = venturi("sql", env={"VENTURI_DSN": CLOSED_PORT_DSN})
    no_password = venturi("--dsn", CLOSED_PORT, "sql", env={})
    for ran in (from_env, no_password):
        assert ran.returncode == 0 and ran.stderr == "", ran.stderr


class _Metrics(http.server.BaseHTTPRequestHandler):
    authorizations: list[str | None] = []  # noqa: RUF012 (one server per test)

    def do_GET(self) -> None:
        type(self).authorizations.append(self.headers.get("Authorization"))
        body = b"venturi_worker_failed 0\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_server() -> Iterator[tuple[int, type[_Metrics]]]:
    handler = type("Metrics", (_Metrics,), {"authorizations": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], handler
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://user:s3cret@127.0.0.1/metrics", "gopher://x", "/metrics"],
)
def test_healthcheck_fetches_http_urls_only(env: dict[str, str], url: str) -> None:
    ran = venturi("healthcheck", "--worker-metrics", url, env=env)
    line = one_error(ran, status=2)
    assert "not an http:// or https:// URL" in line
    assert "s3cret" not in ran.stdout + ran.stderr and "root:" not in ran.stdout


def test_healthcheck_never_prints_a_url_s_password(
    env: dict[str, str], metrics_server: tuple[int, type[_Metrics]]
) -> None:
    port, handler = metrics_server
    down = "http://watch:s3cret@127.0.0.1:1/metrics"
    up = f"http://watch:s3cret@127.0.0.1:{port}/metrics"
    ran = venturi("migrate", env=env)
    assert ran.returncode == 0, ran.stderr
    ran = venturi("healthcheck", "--worker-metrics", up, "--worker-metrics", down, env=env)
    assert "s3cret" not in ran.stdout + ran.stderr
    assert f"ok   worker: http://127.0.0.1:{port}/metrics: running" in ran.stdout
    assert "FAIL worker: no answer from http://127.0.0.1:1/metrics" in ran.stdout
    # The userinfo is sent as Basic credentials, not lost.
    assert handler.authorizations == ["Basic d2F0Y2g6czNjcmV0"]


def test_bench_warns_about_a_password_in_its_own_dsn_option() -> None:
    # `--backlog 0 --workload backlog` is refused before any connection is made.
    args = ["bench", "--dsn", CLOSED_PORT_DSN, "--backlog", "0", "--workload", "backlog"]
    ran = venturi(*args, env={})
    lines = ran.stderr.splitlines()
    assert lines[0].startswith("warning: the password in --dsn is visible"), ran.stderr
    assert lines[1:] and lines[-1].startswith("Error: "), ran.stderr
    assert "topsecret" not in ran.stderr


def test_a_port_in_use_is_one_line(env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        ran = venturi("dashboard", "--port", port, env=env)
    assert "Address already in use" in one_error(ran)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    with Path("/dev/full").open("w") as full:
        ran = subprocess.run(
            [sys.executable, "-m", "venturi", "sql"],
            check=False,
            env={**inherited, **env},
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    ran.stdout = ""
    assert "No space left on device" in one_error(ran)
