"""The Django app against the real database: the example shop end to end (ORM writes and
jobs in one transaction, rollback, on_commit), settings, and ``manage.py venturi``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django", minversion="5.2")

from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test import Client

from tests.support import wait_until
from venturi import InvalidJob, JobStatus, NewJob, Queue
from venturi.contrib import django as venturi_django
from venturi.contrib.django.conf import (
    SettingsError,
    VenturiSettings,
    connection_params,
)
from venturi.contrib.django.management.commands.venturi import _forwarded

MANAGE = Path(__file__).with_name("manage.py")


def _orders() -> list[tuple[str, str]]:
    from tests.contrib.django.shop.models import Order

    return list(Order.objects.order_by("pk").values_list("item", "status"))


@pytest.fixture(autouse=True)
def _empty_orders(orders_table: str) -> None:
    from tests.contrib.django.shop.models import Order

    Order.objects.all().delete()


def test_a_request_commits_the_order_and_its_job_together(queue: Queue) -> None:
    response = Client().post("/orders/", {"item": "tea"})
    assert response.status_code == 200
    job = queue.get(response.json()["job"])
    assert job is not None and job.payload == {"order_id": response.json()["order"]}
    with queue.worker(concurrency=2, poll_interval=1):
        wait_until(lambda: _orders() == [("tea", "fulfilled")], what="the order fulfilled")
        wait_until(lambda: queue.get(job.id).status is JobStatus.COMPLETED, what="completion")  # type: ignore[union-attr]
    assert queue.journal(job.id)[-1].attachment == "fulfilled"


def test_a_rolled_back_request_leaves_neither_order_nor_job(queue: Queue) -> None:
    with pytest.raises(RuntimeError, match="payment declined"):
        Client().post("/orders/", {"item": "lost", "fail": "1"})
    assert _orders() == []
    assert queue.history(kind="shop.fulfil") == []
    assert queue.drain() == 0  # nothing that could ever run


def test_the_job_is_invisible_until_the_orm_transaction_commits(queue: Queue) -> None:
    from tests.contrib.django.shop.jobs import fulfil
    from tests.contrib.django.shop.models import Order

    with transaction.atomic():
        order = Order.objects.create(item="cake")
        job_id = fulfil.enqueue(order_id=order.pk)
        assert queue.get(job_id) is None  # another connection cannot see it yet
        with transaction.atomic():  # a savepoint rolled back takes its job along
            dropped = venturi_django.enqueue("shop.fulfil", {"order_id": -1})
            transaction.set_rollback(True)
    assert queue.get(job_id) is not None
    assert queue.get(dropped) is None
    assert queue.drain() == 1
    assert _orders() == [("cake", "fulfilled")]


def test_a_batch_joins_the_orm_transaction_too(queue: Queue) -> None:
    jobs = [NewJob("shop.fulfil", {"order_id": n}) for n in (1, 2)]
    with transaction.atomic():
        ids = queue.enqueue_many(jobs, conn=venturi_django.django_connection())
        transaction.set_rollback(True)
    assert [queue.get(i) for i in ids] == [None, None]
    ids = queue.enqueue_many(jobs, conn=venturi_django.django_connection())
    assert [getattr(queue.get(i), "payload", None) for i in ids] == [
        {"order_id": 1},
        {"order_id": 2},
    ]


def test_dedup_merge_runs_on_djangos_connection(queue: Queue) -> None:
    def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return {"order_id": max(old["order_id"], new["order_id"])}

    with transaction.atomic():
        first = venturi_django.enqueue("shop.fulfil", {"order_id": 1}, dedup_key="k")
        second = venturi_django.enqueue(
            "shop.fulfil", {"order_id": 7}, dedup_key="k", on_duplicate=merge
        )
    assert first == second
    assert queue.get(first).payload == {"order_id": 7}  # type: ignore[union-attr]


def test_enqueue_on_commit_waits_for_the_commit(queue: Queue) -> None:
    with pytest.raises(RuntimeError):
        Client().post("/orders/on-commit/", {"item": "lost", "fail": "1"})
    assert queue.history(kind="shop.fulfil") == []
    order_id = Client().post("/orders/on-commit/", {"item": "kept"}).json()["order"]
    assert [j.payload["order_id"] for j in queue.history(kind="shop.fulfil")] == [order_id]
    assert queue.drain() == 1
    assert _orders() == [("kept", "fulfilled")]
    with pytest.raises(InvalidJob, match="order_id"):  # checked at once, not at commit
        venturi_django.enqueue_on_commit("shop.fulfil", {"wrong": 1})


def test_settings_are_checked(orders_table: str) -> None:
    from django.test.utils import override_settings

    with (
        override_settings(VENTURI={"PREFX": "x"}),
        pytest.raises(SettingsError, match="PREFX"),
    ):
        VenturiSettings.load()
    with (
        override_settings(VENTURI={"POOL_SIZE": 0}),
        pytest.raises(SettingsError, match="POOL_SIZE"),
    ):
        VenturiSettings.load()
    with (
        override_settings(VENTURI={"AUTODISCOVER": "jobs"}),
        pytest.raises(SettingsError, match="AUTODISCOVER"),
    ):
        VenturiSettings.load()


def test_connection_parameters_follow_the_databases_entry() -> None:
    params = connection_params(
        {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "shop",
            "USER": "app",
            "PASSWORD": "secret",
            "HOST": "db.internal",
            "PORT": 6432,
            "OPTIONS": {
                "sslmode": "verify-full",
                "sslrootcert": "/etc/ca.pem",
                "application_name": "shop",
                "pool": True,
                "isolation_level": 2,
                "server_side_binding": True,
            },
        }
    )
    assert params == {
        "dbname": "shop",
        "user": "app",
        "password": "secret",
        "host": "db.internal",
        "port": "6432",
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
        "application_name": "shop",
    }
    with pytest.raises(SettingsError, match="PostgreSQL"):
        connection_params({"ENGINE": "django.db.backends.sqlite3", "NAME": "x"})


def test_manage_py_venturi_runs_the_cli_on_the_projects_queue(
    queue: Queue, capsys: pytest.CaptureFixture[str]
) -> None:
    venturi_django.enqueue("shop.fulfil", {"order_id": 1})
    call_command("venturi", "stats")
    assert "shop.fulfil" in capsys.readouterr().out
    with pytest.raises(CommandError) as failed:
        call_command("venturi", "no-such-command")
    assert failed.value.returncode == 2
    ManagementUtility(["manage.py", "venturi", "--help"]).execute()
    assert "worker" in capsys.readouterr().out
    assert _forwarded(["--settings", "x", "stats", "--pythonpath=/p", "-h"]) == ["stats", "-h"]


def _shop_env(database_dsn: str, orders_table: str, prefix: str) -> dict[str, str]:
    """The environment a ``manage.py`` process of the test shop reads its database from."""
    return {
        **os.environ,
        "SHOP_DSN": database_dsn,
        "SHOP_TABLE": orders_table,
        "SHOP_PREFIX": prefix,
    }


def test_manage_py_venturi_worker_runs_jobs_in_its_own_process(
    queue: Queue, orders_table: str, database_dsn: str, prefix: str
) -> None:
    env = _shop_env(database_dsn, orders_table, prefix)
    worker = subprocess.Popen(
        [sys.executable, str(MANAGE), "venturi", "worker", "--concurrency", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        response = Client().post("/orders/", {"item": "soup"})
        assert response.status_code == 200
        wait_until(lambda: _orders() == [("soup", "fulfilled")], what="the worker process")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 0, errors
    assert "shop.fulfil" in errors  # the worker logged the kinds it found by autodiscovery


def test_manage_py_venturi_worker_runs_a_group_of_worker_processes(
    queue: Queue, orders_table: str, database_dsn: str, prefix: str
) -> None:
    env = _shop_env(database_dsn, orders_table, prefix)
    group = subprocess.Popen(
        [
            sys.executable,
            str(MANAGE),
            "venturi",
            "worker",
            "--processes",
            "2",
            *["--max-memory-per-child", "1GB"],
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for item in ("soup", "bread"):
            assert Client().post("/orders/", {"item": item}).status_code == 200
        wanted = [("soup", "fulfilled"), ("bread", "fulfilled")]
        wait_until(lambda: _orders() == wanted, what="the group's worker processes")
    finally:
        group.send_signal(signal.SIGTERM)
        _, errors = group.communicate(timeout=60)
    assert group.returncode == 0, errors
    assert "worker group of 2 processes starting" in errors
    assert len(re.findall(r"worker process \d+ started", errors)) == 2, errors


def test_enqueue_carries_a_concurrency_key_in_the_orm_transaction(queue: Queue) -> None:
    with transaction.atomic():
        job_id = venturi_django.enqueue("crm.sync", {}, concurrency_key="customer:42")
        venturi_django.enqueue_on_commit("crm.sync", {}, concurrency_key="customer:7")
    record = queue.get(job_id)
    assert record is not None and record.concurrency_key == "customer:42"
    keys = {j.concurrency_key for j in queue.history(kind="crm.sync")}
    assert keys == {"customer:42", "customer:7"}
    with pytest.raises(InvalidJob, match="has no key_concurrency"):
        venturi_django.enqueue("shop.fulfil", {"order_id": 1}, concurrency_key="a")


def test_enqueue_after_parents_in_the_orm_transaction(queue: Queue) -> None:
    from tests.contrib.django.shop.jobs import fulfil  # registers the handler

    with transaction.atomic():
        parent = venturi_django.enqueue("shop.fulfil", {"order_id": 1})
        child = venturi_django.enqueue("shop.fulfil", {"order_id": 2}, depends_on=[parent])
        venturi_django.enqueue_on_commit("shop.fulfil", {"order_id": 3}, depends_on=[parent])
    record = queue.get(child)
    assert record is not None and record.status is JobStatus.WAITING
    waiting = [j for j in queue.history(kind="shop.fulfil") if j.status is JobStatus.WAITING]
    assert len(waiting) == 2
    with pytest.raises(InvalidJob), transaction.atomic():
        venturi_django.enqueue("shop.fulfil", {"order_id": 4}, depends_on=[child, "0" * 26])
    assert len(queue.history(kind="shop.fulfil")) == 3  # the refused job wrote nothing
    assert queue.drain() == 3  # the parent, then the children it released
    assert {j.status for j in queue.history(kind="shop.fulfil")} == {JobStatus.COMPLETED}
    assert fulfil.kind == "shop.fulfil"
