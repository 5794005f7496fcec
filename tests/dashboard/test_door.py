"""The dashboard's doors (issue 36): the Host allow-list, CSRF tokens bound to a
session, Secure cookies over HTTPS, slowed password guesses, the ``next`` redirect,
query parameters, the error pages of a prefix without tables or a database that is
down, and the warning of a dashboard served without authentication."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import Client, TestResponse

import venturi
from tests.cli.conftest import CLOSED_PORT_DSN
from tests.dashboard.conftest import csrf_token
from tests.dashboard.scene import Scene
from venturi.contrib.flask import Venturi, mount_dashboard
from venturi.dashboard import Dashboard, LoginThrottle
from venturi.models import JobStatus


def get(client: Client, path: str, host: str, **extra: str) -> TestResponse:
    return client.get(path, environ_overrides={"HTTP_HOST": host, **extra})


# -- finding 6: the Host allow-list ---------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:9", "[::1]", "[::1]:8080"],
)
def test_local_host_names_are_served(scene: Scene, host: str) -> None:
    assert get(Client(Dashboard(scene.queue)), "/", host).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.", ""]
)
def test_any_other_host_name_is_refused(scene: Scene, host: str) -> None:
    """A page whose name rebinds to 127.0.0.1 sends its own name as Host: refused, so it
    can neither read a page nor get a CSRF token."""
    refused = get(Client(Dashboard(scene.queue)), f"/jobs/{scene.ids['dead']}", host)
    assert refused.status_code == 400
    assert "host" in refused.text.lower() and "bad address" not in refused.text
    assert "Set-Cookie" not in refused.headers


def test_configured_host_names_are_served(scene: Scene) -> None:
    app = Dashboard(scene.queue, allowed_hosts=["ops.example.com", ".internal.example"])
    client = Client(app)
    assert get(client, "/", "ops.example.com:443").status_code == 200
    assert get(client, "/", "OPS.example.com").status_code == 200
    assert get(client, "/", "queue.internal.example").status_code == 200
    assert get(client, "/", "internal.example").status_code == 200
    assert get(client, "/", "localhost").status_code == 200
    assert get(client, "/", "other.example.com").status_code == 400


def test_a_post_under_a_foreign_host_is_refused(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue))
    token = csrf_token(client.get("/kinds"))
    sent = client.post(
        f"/jobs/{scene.ids['pending']}/cancel",
        data={"csrf_token": token},
        environ_overrides={"HTTP_HOST": "evil.example"},
    )
    assert sent.status_code == 400
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING


def test_a_dashboard_without_authentication_warns_once(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="venturi.dashboard"):
        app = Dashboard(scene.queue)
        Client(app).get("/")
        Client(app).get("/")
    warned = [r for r in caplog.records if r.name == "venturi.dashboard"]
    assert len(warned) == 1, warned
    assert "authorize" in warned[0].getMessage() and "password" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="venturi.dashboard"):
        Dashboard(scene.queue, password="s3cret")
        Dashboard(scene.queue, authorize=lambda environ: True)
        Dashboard(scene.queue, allow_anonymous=True)
    assert not [r for r in caplog.records if r.name == "venturi.dashboard"]


# -- finding 9: CSRF bound to a session, Secure cookies, slowed guesses ---------------


def test_a_token_and_its_cookie_copied_to_another_session_are_refused(scene: Scene) -> None:
    """The token of one browser's session, with the cookie it came with, does not pass in
    another browser that has a session of its own."""
    first = Client(Dashboard(scene.queue, secret="shared"))
    token = csrf_token(first.get("/kinds"))
    app = Dashboard(scene.queue, secret="shared")
    second = Client(app)
    second.get("/kinds")  # its own session
    second.set_cookie("venturi_csrf", token)
    refused = second.post(f"/jobs/{scene.ids['pending']}/cancel", data={"csrf_token": token})
    assert refused.status_code == 403
    assert scene.status(scene.ids["pending"]) is JobStatus.PENDING
    # The token of its own session passes.
    own = Client(app)
    sent = own.post(
        f"/jobs/{scene.ids['pending']}/cancel", data={"csrf_token": csrf_token(own.get("/kinds"))}
    )
    assert sent.status_code == 303
    assert scene.status(scene.ids["pending"]) is JobStatus.CANCELLED


def _cookies(response: TestResponse) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in response.headers.getlist("Set-Cookie")}


def _act(client: Client, scene: Scene, **environ: str) -> TestResponse:
    token = csrf_token(client.get("/kinds", environ_overrides=environ))
    return client.post(
        "/kinds/pause", data={"csrf_token": token, "kind": "mail"}, environ_overrides=environ
    )


def test_cookies_are_secure_over_https(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue))
    page = client.get("/", environ_overrides={"wsgi.url_scheme": "https"})
    assert "; Secure" in _cookies(page)["venturi_csrf"]
    done = _act(client, scene, **{"wsgi.url_scheme": "https"})
    assert done.status_code == 303
    assert "; Secure" in _cookies(done)["venturi_notice"]
    plain = Client(Dashboard(scene.queue)).get("/")
    assert "Secure" not in _cookies(plain)["venturi_csrf"]


def test_x_forwarded_proto_counts_only_when_trusted(scene: Scene) -> None:
    forwarded = {"HTTP_X_FORWARDED_PROTO": "https"}
    untrusted = Client(Dashboard(scene.queue)).get("/", environ_overrides=forwarded)
    assert "Secure" not in _cookies(untrusted)["venturi_csrf"]
    trusted = Client(Dashboard(scene.queue, trust_forwarded_proto=True))
    assert "; Secure" in _cookies(trusted.get("/", environ_overrides=forwarded))["venturi_csrf"]


def basic(password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_password_guesses_after_failures_are_refused_for_a_while(scene: Scene) -> None:
    clock = FakeClock()
    throttle = LoginThrottle(free_failures=3, base_delay=2.0, max_delay=30.0, clock=clock)
    client = Client(Dashboard(scene.queue, password="s3cret", login_throttle=throttle))
    for _ in range(3):
        assert client.get("/", headers=basic("guess")).status_code == 401
    slowed = client.get("/", headers=basic("guess"))
    assert slowed.status_code == 401  # the fourth failure starts the delay
    refused = client.get("/", headers=basic("s3cret"))
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "2"
    clock.now += 2.0
    assert client.get("/", headers=basic("guess")).status_code == 401
    refused = client.get("/", headers=basic("s3cret"))
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "4"  # doubled
    clock.now += 4.0
    assert client.get("/", headers=basic("s3cret")).status_code == 200  # success resets
    assert client.get("/", headers=basic("guess")).status_code == 401
    # Another client is not held up by this one's failures.
    other = client.get("/", headers=basic("s3cret"), environ_overrides={"REMOTE_ADDR": "10.0.0.9"})
    assert other.status_code == 200


def test_the_delay_is_capped(scene: Scene) -> None:
    clock = FakeClock()
    throttle = LoginThrottle(free_failures=0, base_delay=1.0, max_delay=5.0, clock=clock)
    client = Client(Dashboard(scene.queue, password="s3cret", login_throttle=throttle))
    for _ in range(8):
        assert client.get("/", headers=basic("guess")).status_code == 401
        clock.now += 100
    client.get("/", headers=basic("guess"))
    assert client.get("/").headers["Retry-After"] == "5"


def test_guesses_are_slowed_by_default(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue, password="s3cret"))
    answers = [client.get("/", headers=basic(f"guess{n}")).status_code for n in range(12)]
    assert 429 in answers, answers


# -- finding 8: the redirect after an action ------------------------------------------


@pytest.mark.parametrize(
    "away",
    [
        "/\t/evil.example",
        "/\n/evil.example",
        "/ /evil.example",
        "/x\r\nSet-Cookie: evil=1",
        "/\\evil.example",
        "/\x00",
        "//evil.example",
        "https://evil.example/",
        "jobs",
        "",
    ],
)
def test_next_accepts_only_a_path_of_this_dashboard(scene: Scene, away: str) -> None:
    client = Client(Dashboard(scene.queue))
    token = csrf_token(client.get("/kinds"))
    sent = client.post("/kinds/pause", data={"csrf_token": token, "kind": "x", "next": away})
    assert sent.status_code == 303
    assert sent.headers["Location"] == "/"


def test_next_keeps_a_page_of_the_dashboard_with_its_query(scene: Scene) -> None:
    client = Client(Dashboard(scene.queue))
    token = csrf_token(client.get("/kinds"))
    back = "/jobs?kind=mail&status=dead"
    sent = client.post("/kinds/pause", data={"csrf_token": token, "kind": "x", "next": back})
    assert sent.headers["Location"] == back


# -- finding 11: query parameters -----------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("kind=a%00b", "kind"),
        ("find=a%00b", "find"),
        ("find=a%0Db", "find"),
        ("status=a%00", "status"),
        ("kind=no%20spaces", "kind"),
        ("status=nope", "status must be one of"),
        ("before=zzz", "before"),
        ("page=a%00", "page"),
    ],
)
def test_a_bad_query_parameter_answers_400_naming_it(
    client: Client, query: str, message: str
) -> None:
    answer = client.get(f"/jobs?{query}")
    assert answer.status_code == 400, answer.text
    assert message in answer.text
    assert "Traceback" not in answer.text


def test_a_nul_in_the_workflow_id_answers_400(client: Client) -> None:
    assert client.get("/workflows?id=a%00b").status_code == 400


def test_good_query_parameters_still_filter(client: Client, scene: Scene) -> None:
    answer = client.get("/jobs?kind=mail&status=dead")
    assert answer.status_code == 200
    assert str(scene.ids["dead"]) in answer.text
    assert str(scene.ids["dead_report"]) not in answer.text


@contextmanager
def _flask_client(dsn: str, prefix: str, **config: object) -> Iterator[FlaskClient]:
    app = Flask("door_app")
    app.config.update(VENTURI_DSN=dsn, VENTURI_PREFIX=prefix, VENTURI_POOL_SIZE=2, **config)
    app.secret_key = "flask-secret"
    extension = Venturi(app)
    mount_dashboard(app, extension, authorize=lambda: True, url_prefix="/ops")
    try:
        yield app.test_client()
    finally:
        extension.close(app)


def test_flask_mount_answers_400_to_a_bad_query(
    scene: Scene, database_dsn: str, prefix: str
) -> None:
    with _flask_client(database_dsn, prefix) as client:
        for query in ["kind=a%00b", "find=a%00b", "status=nope"]:
            answer = client.get(f"/ops/jobs?{query}")
            assert answer.status_code == 400, (query, answer.text)


def test_flask_mount_refuses_a_foreign_host_by_default(
    scene: Scene, database_dsn: str, prefix: str
) -> None:
    with _flask_client(database_dsn, prefix) as client:
        assert client.get("/ops/").status_code == 200
        assert client.get("/ops/", headers={"Host": "evil.example"}).status_code == 400


def test_flask_mount_follows_trusted_hosts(scene: Scene, database_dsn: str, prefix: str) -> None:
    with _flask_client(database_dsn, prefix, TRUSTED_HOSTS=["ops.example.com"]) as client:
        assert client.get("/ops/", headers={"Host": "ops.example.com"}).status_code == 200
        assert client.get("/ops/", headers={"Host": "evil.example"}).status_code == 400


# -- finding 17: what is wrong, without a traceback -----------------------------------


def test_a_prefix_without_tables_says_to_migrate(database_dsn: str, prefix: str) -> None:
    queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=2)
    try:
        client = Client(Dashboard(queue))
        for path in ["/", "/jobs", "/dead", f"/jobs/{'0' * 26}"]:
            answer = client.get(path)
            assert answer.status_code == 503, path
            assert f"the prefix {prefix} has no tables: run `venturi migrate`" in answer.text
            assert "Traceback" not in answer.text and "relation" not in answer.text
    finally:
        queue.close()


def test_flask_mount_says_a_prefix_has_no_tables(database_dsn: str, prefix: str) -> None:
    with _flask_client(database_dsn, prefix) as client:
        answer = client.get("/ops/")
    assert answer.status_code == 503
    assert f"the prefix {prefix} has no tables: run `venturi migrate`" in answer.text


def test_a_database_that_is_down_is_named(prefix: str) -> None:
    queue = venturi.Queue(CLOSED_PORT_DSN, prefix=prefix, pool_size=1, pool_timeout=2)
    try:
        answer = Client(Dashboard(queue)).get("/")
        assert answer.status_code == 503
        assert "the database is unreachable" in answer.text
        assert "topsecret" not in answer.text and "Traceback" not in answer.text
        assert re.search(r"<h1>503", answer.text)
    finally:
        queue.close()
