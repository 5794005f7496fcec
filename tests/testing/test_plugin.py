"""The pytest plugin as a user meets it: throwaway projects written to a temp dir and run
with pytest in a subprocess (pytester), in manual and inline mode; and a project that
does not use it, which it leaves alone."""

from __future__ import annotations

import textwrap

import pytest

APP_JOBS = '''
import os

import venturi

queue = venturi.Queue(os.environ["VENTURI_DSN"], prefix="plugin_shop_app", pool_size=1)
sent = []


@queue.job("emails.send", max_attempts=2)
def send(to: str, subject: str = "hello") -> None:
    if to.startswith("bounce"):
        raise RuntimeError(f"{to} bounced")
    sent.append(to)


@queue.job("orders.place")
def place(order: int) -> None:
    send.enqueue(to=f"customer{order}@example.com", subject="thanks")


def checkout(order: int) -> None:
    """Application code under test: places an order in the background."""
    place.enqueue(order=order)
'''

TESTS = """
from datetime import timedelta

import pytest

import app_jobs
from venturi.testing import advance, assert_enqueued, enqueued, refute_enqueued


def test_manual_jobs_wait_for_drain(venturi_queue):
    queue = venturi_queue(app_jobs.queue)
    app_jobs.checkout(7)
    assert_enqueued(queue, "orders.place", {"order": 7})
    refute_enqueued(queue, "emails.send")
    queue.drain()
    assert app_jobs.sent == ["customer7@example.com"]
    assert enqueued(queue) == []


def test_inline_runs_jobs_as_they_are_enqueued(venturi_queue):
    queue = venturi_queue("app_jobs", mode="inline")
    app_jobs.sent.clear()
    app_jobs.checkout(8)
    assert app_jobs.sent == ["customer8@example.com"]
    refute_enqueued(queue, "orders.place")


def test_inline_failures_raise_and_retries_wait_for_advance(venturi_queue):
    queue = venturi_queue("app_jobs:queue", mode="inline")
    with pytest.raises(RuntimeError, match="bounced"):
        app_jobs.send.enqueue(to="bounce@example.com")
    [job] = assert_enqueued(queue, "emails.send", {"to": "bounce@example.com"})
    with pytest.raises(RuntimeError, match="bounced"):
        advance(queue, "1h")
    assert queue.get(job.id).status.value == "dead"


def test_delay_and_advance(venturi_queue):
    queue = venturi_queue(app_jobs.queue)
    app_jobs.sent.clear()
    app_jobs.send.enqueue_with({"to": "later@example.com"}, delay=timedelta(hours=1))
    assert_enqueued(queue, "emails.send", delay=3600)
    assert queue.drain() == 0
    advance(queue, "1h")
    assert queue.drain() == 1
    assert app_jobs.sent == ["later@example.com"]


def test_failure_message_lists_what_was_enqueued(venturi_queue):
    queue = venturi_queue(app_jobs.queue)
    app_jobs.send.enqueue(to="someone@example.com")
    assert_enqueued(queue, "emails.send", {"to": "nobody@example.com"})
"""


@pytest.fixture
def project(pytester: pytest.Pytester, venturi_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTURI_TEST_DSN", venturi_dsn)
    monkeypatch.setenv("VENTURI_DSN", venturi_dsn)
    pytester.makepyfile(app_jobs=APP_JOBS, test_shop=TESTS)


def test_a_project_tests_its_jobs_with_the_plugin(
    pytester: pytest.Pytester, project: None, venturi_dsn: str
) -> None:
    result = pytester.runpytest_subprocess("-W", "error", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected job of kind 'emails.send' with payload containing*nobody@example.com*"
            "found none.",
            "*Enqueued (1):",
            '*emails.send {"to": "someone@example.com"} priority=0 due at enqueue*',
        ]
    )


def test_the_shop_prefix_is_never_touched(
    pytester: pytest.Pytester, project: None, venturi_dsn: str
) -> None:
    """Every test ran under a fresh prefix, dropped after it: the app's own prefix was
    never created."""
    import psycopg

    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=4, failed=1)
    with psycopg.connect(venturi_dsn) as conn:
        leftovers = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'plugin_shop_app%%' "
            "OR tablename LIKE 't_test_manual_jo%%'"
        ).fetchall()
    assert leftovers == []


PLAIN = """
import pytest


@pytest.fixture
def venturi_queue():
    return "the project's own fixture"


def test_own_fixture_wins(venturi_queue):
    assert venturi_queue == "the project's own fixture"


def test_plain():
    assert 1 + 1 == 2
"""


def test_a_project_that_does_not_use_it_is_left_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No server answers at these addresses: a fixture that reached for a database would fail.
    monkeypatch.setenv("VENTURI_TEST_DSN", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.setenv("VENTURI_TEST_LOCAL_DSN", "postgresql://nobody@127.0.0.1:9/none")
    pytester.makepyfile(test_plain=PLAIN)
    with_plugin = pytester.runpytest_subprocess("-W", "error", "-p", "no:cacheprovider")
    with_plugin.assert_outcomes(passed=2)
    without = pytester.runpytest_subprocess("-p", "no:venturi", "-p", "no:cacheprovider")
    without.assert_outcomes(passed=2)
    listing = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    listing.stdout.fnmatch_lines(["*venturi_dsn*", "*venturi_queue*"])


def test_the_dsn_fixture_says_what_to_do_when_no_server_answers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VENTURI_TEST_DSN", raising=False)
    monkeypatch.setenv("VENTURI_TEST_LOCAL_DSN", "postgresql://nobody@127.0.0.1:9/none")
    pytester.makepyfile(
        test_dsn=textwrap.dedent(
            """
            def test_dsn(venturi_dsn):
                assert venturi_dsn.startswith("postgresql://")
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    # The embedded server (dev extra) starts when no server answers.
    result.assert_outcomes(passed=1)
