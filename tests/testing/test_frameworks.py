"""The testing modes in the frameworks, as a user meets them: throwaway projects run with
pytest in a subprocess (pytester) — a Django project whose ``TestCase`` and
``TransactionTestCase`` tests run with ``VENTURI["TESTING"]`` manual and inline, and a
Flask app with ``VENTURI_TESTING``."""

from __future__ import annotations

import importlib.util
import uuid

import psycopg
import pytest
from psycopg import sql

pytest.importorskip("django")
TASKS_AVAILABLE = importlib.util.find_spec("django.tasks") is not None

DJANGO_CONFTEST = """
import os

import django
import pytest
from django.conf import settings
from psycopg.conninfo import conninfo_to_dict

params = conninfo_to_dict(os.environ["VENTURI_TEST_DSN"])
settings.configure(
    SECRET_KEY="throwaway",
    USE_TZ=True,
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": params.pop("dbname", "postgres"),
            "USER": params.pop("user", ""),
            "HOST": params.pop("host", ""),
            "PORT": str(params.pop("port", "")),
        }
    },
    INSTALLED_APPS=["venturi.contrib.django", "shop"],
    VENTURI={"PREFIX": os.environ["SHOP_PREFIX"], "TESTING": os.environ["SHOP_TESTING"]},
    TASKS={"default": {"BACKEND": "venturi.contrib.django.VenturiBackend"}},
    SHOP_TABLE=os.environ["SHOP_TABLE"],
)
django.setup()


@pytest.fixture(scope="session", autouse=True)
def orders_table():
    from django.db import connection

    from shop.models import Order

    with connection.schema_editor() as editor:
        editor.create_model(Order)
    yield
    with connection.schema_editor() as editor:
        editor.delete_model(Order)
"""

SHOP_MODELS = """
from django.conf import settings
from django.db import models


class Order(models.Model):
    number = models.IntegerField()
    receipted = models.BooleanField(default=False)

    class Meta:
        app_label = "shop"
        db_table = settings.SHOP_TABLE
"""

SHOP_JOBS = '''
from django.db import transaction

from venturi.contrib.django import job

from shop.models import Order


@job("shop.receipt")
def receipt(order_id: int) -> None:
    Order.objects.filter(pk=order_id).update(receipted=True)


@job("shop.audit")
def audit(order_id: int) -> None:
    if Order.objects.get(pk=order_id).number < 0:
        raise ValueError("negative order number")


def checkout(number: int) -> Order:
    """The code under test: an order and its receipt job, in one transaction."""
    with transaction.atomic():
        order = Order.objects.create(number=number)
        receipt.enqueue(order_id=order.pk)
    return order
'''

SHOP_TASKS = """
from django.tasks import task

from shop.models import Order


@task()
def stamp(order_id: int) -> None:
    Order.objects.filter(pk=order_id).update(receipted=True)
"""

DJANGO_MANUAL_TESTS = """
import importlib.util
from unittest import skipUnless

from django.test import TestCase, TransactionTestCase

from venturi.contrib.django import testing as jobs

from shop.jobs import audit, checkout
from shop.models import Order


class CheckoutTests(TestCase):
    def test_the_receipt_waits_for_drain(self):
        order = checkout(7)
        [job] = jobs.assert_enqueued("shop.receipt", {"order_id": order.pk})
        jobs.refute_enqueued("shop.audit")
        order.refresh_from_db()
        self.assertFalse(order.receipted)
        self.assertEqual(jobs.drain(), 1)
        order.refresh_from_db()
        self.assertTrue(order.receipted)
        self.assertEqual(jobs.enqueued(), [])

    def test_each_test_starts_empty(self):
        self.assertEqual(jobs.enqueued(), [])

    def test_a_failing_job_in_drain_is_retried_later(self):
        order = Order.objects.create(number=-1)
        audit.enqueue(order_id=order.pk)
        self.assertEqual(jobs.drain(), 1)
        [job] = jobs.assert_enqueued("shop.audit")
        self.assertEqual(job.failure_count, 1)
        jobs.advance("1h")
        self.assertEqual(jobs.drain(), 1)

    def test_inline_for_a_block(self):
        with jobs.inline():
            order = checkout(8)
        order.refresh_from_db()
        self.assertTrue(order.receipted)


class CommittedCheckoutTests(TransactionTestCase):
    def tearDown(self):
        jobs.clear()

    def test_committed_jobs(self):
        order = checkout(9)
        jobs.assert_enqueued("shop.receipt", {"order_id": order.pk}, count=1)
        self.assertEqual(jobs.drain(), 1)
        order.refresh_from_db()
        self.assertTrue(order.receipted)

    def test_cleared_between_tests(self):
        self.assertEqual(jobs.enqueued(), [])
        checkout(10)


@skipUnless(importlib.util.find_spec("django.tasks"), "django.tasks needs Django 6")
class TaskTests(TestCase):
    def test_a_task_waits_for_drain(self):
        from shop.tasks import stamp

        order = Order.objects.create(number=3)
        stamp.enqueue(order.pk)
        jobs.assert_enqueued("django.tasks:default:default", count=1)
        self.assertEqual(jobs.drain(), 1)
        order.refresh_from_db()
        self.assertTrue(order.receipted)
"""

DJANGO_INLINE_TESTS = """
import importlib.util
from unittest import skipUnless

from django.test import TestCase, TransactionTestCase

from venturi.contrib.django import testing as jobs

from shop.jobs import audit, checkout
from shop.models import Order


class InlineCheckoutTests(TestCase):
    def test_the_receipt_runs_at_once_inside_the_test_transaction(self):
        order = checkout(7)
        order.refresh_from_db()
        self.assertTrue(order.receipted)
        jobs.refute_enqueued("shop.receipt")

    def test_failures_raise_in_the_test(self):
        order = Order.objects.create(number=-1)
        with self.assertRaisesMessage(ValueError, "negative order number"):
            audit.enqueue(order_id=order.pk)
        jobs.assert_enqueued("shop.audit", {"order_id": order.pk})

    def test_manual_for_a_block(self):
        with jobs.manual():
            order = checkout(8)
            jobs.assert_enqueued("shop.receipt", {"order_id": order.pk})


class InlineCommittedTests(TransactionTestCase):
    def tearDown(self):
        jobs.clear()

    def test_runs_at_once(self):
        order = checkout(9)
        order.refresh_from_db()
        self.assertTrue(order.receipted)


@skipUnless(importlib.util.find_spec("django.tasks"), "django.tasks needs Django 6")
class InlineTaskTests(TestCase):
    def test_a_task_runs_at_once(self):
        from shop.tasks import stamp

        order = Order.objects.create(number=3)
        stamp.enqueue(order.pk)
        order.refresh_from_db()
        self.assertTrue(order.receipted)
"""


def _drop_tables(dsn: str, *names: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(name)))


DJANGO_CASES = {"manual": (DJANGO_MANUAL_TESTS, 6), "inline": (DJANGO_INLINE_TESTS, 4)}


@pytest.mark.parametrize("mode", sorted(DJANGO_CASES))
def test_a_django_project_tests_its_jobs(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    venturi_dsn: str,
    prefix: str,
    mode: str,
) -> None:
    tests, passed = DJANGO_CASES[mode]
    table = f"shop_orders_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("VENTURI_TEST_DSN", venturi_dsn)
    monkeypatch.setenv("SHOP_PREFIX", prefix)
    monkeypatch.setenv("SHOP_TABLE", table)
    monkeypatch.setenv("SHOP_TESTING", mode)
    pytester.makeconftest(DJANGO_CONFTEST)
    pytester.mkpydir("shop")
    pytester.makepyfile(
        **{"shop/models": SHOP_MODELS, "shop/jobs": SHOP_JOBS, "shop/tasks": SHOP_TASKS}
    )
    pytester.makepyfile(test_checkout=tests)
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    finally:
        _drop_tables(venturi_dsn, table)
    if TASKS_AVAILABLE:
        result.assert_outcomes(passed=passed + 1)
    else:
        result.assert_outcomes(passed=passed, skipped=1)


FLASK_APP = """
import os

from flask import Flask

from venturi.contrib.flask import Venturi

venturi = Venturi()
sent = []


@venturi.job("mail.welcome")
def welcome(to: str) -> None:
    if to.endswith("@invalid"):
        raise ValueError(f"cannot mail {to}")
    sent.append(to)


def create_app(**config):
    app = Flask(__name__)
    app.config.update(VENTURI_DSN=os.environ["VENTURI_TEST_DSN"], **config)
    venturi.init_app(app)

    @app.post("/signup/<name>")
    def signup(name):
        welcome.enqueue(to=f"{name}@example.com")
        return "ok"

    return app
"""

FLASK_TESTS = """
import os

import pytest

import mailer
from venturi.testing import assert_enqueued, refute_enqueued


@pytest.fixture
def app(venturi_queue):
    prefix = venturi_queue().prefix  # a fresh prefix, dropped after the test
    mailer.sent.clear()
    app = mailer.create_app(VENTURI_PREFIX=prefix, VENTURI_TESTING=os.environ["MAILER_MODE"])
    yield app
    mailer.venturi.close(app)


@pytest.mark.skipif(os.environ["MAILER_MODE"] != "manual", reason="manual mode")
def test_manual_signup_waits_for_drain(app):
    app.test_client().post("/signup/ada")
    assert_enqueued(mailer.venturi.queue_for(app), "mail.welcome", {"to": "ada@example.com"})
    assert mailer.sent == []
    assert mailer.venturi.queue_for(app).drain() == 1
    assert mailer.sent == ["ada@example.com"]


@pytest.mark.skipif(os.environ["MAILER_MODE"] != "inline", reason="inline mode")
def test_inline_signup_mails_at_once(app):
    app.test_client().post("/signup/ada")
    assert mailer.sent == ["ada@example.com"]
    refute_enqueued(mailer.venturi.queue_for(app), "mail.welcome")
    with app.app_context(), pytest.raises(ValueError, match="cannot mail"):
        mailer.welcome.enqueue(to="bob@invalid")
"""


@pytest.mark.parametrize("mode", ["manual", "inline"])
def test_a_flask_app_tests_its_jobs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, venturi_dsn: str, mode: str
) -> None:
    monkeypatch.setenv("VENTURI_TEST_DSN", venturi_dsn)
    monkeypatch.setenv("MAILER_MODE", mode)
    pytester.makepyfile(mailer=FLASK_APP, test_mailer=FLASK_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1, skipped=1)
