"""Following the primary (`venturi.store.failover`): which errors say the server left the
primary role, the keywords a multi-host DSN gets, how often a pool's connections are
dropped, and the server a queue reports (`DatabaseServer`, its metric)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from psycopg import errors
from psycopg_pool import ConnectionPool

from venturi.errors import StoreUnavailable
from venturi.metrics import ServerCollector
from venturi.store import failover
from venturi.store.dsn import parse_dsn
from venturi.store.failover import (
    DatabaseServer,
    PrimaryWatch,
    left_primary,
    write_session_keywords,
)


def test_a_read_only_answer_says_the_server_left_the_primary_role() -> None:
    reason = "the server is read-only (25006)"
    assert left_primary(errors.ReadOnlySqlTransaction("x")) == reason
    mapped = StoreUnavailable("x")
    mapped.__cause__ = errors.ReadOnlySqlTransaction("x")
    assert left_primary(mapped) == reason  # as the store raises it, from the psycopg error


@pytest.mark.parametrize(
    "error",
    [
        errors.SerializationFailure("x"),
        errors.UniqueViolation("x"),
        # A shutdown or a crash breaks the connections: the pool tests and replaces them,
        # and a session ended alone (pg_terminate_backend) drops no other.
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.CrashShutdown("x"),
        errors.CannotConnectNow("x"),
        psycopg.OperationalError("connection lost"),  # no answer: the pool's business
        ValueError("x"),
        StoreUnavailable("no cause"),
    ],
)
def test_other_errors_say_nothing_of_the_primary(error: BaseException) -> None:
    assert left_primary(error) is None


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("host=a,b port=5432,5433", {"target_session_attrs": "read-write"}),
        ("postgresql://u@a:5432,b:5433/db", {"target_session_attrs": "read-write"}),
        ("hostaddr=10.0.0.1,10.0.0.2", {"target_session_attrs": "read-write"}),
        ("host=a,b target_session_attrs=primary", {}),  # the DSN's own choice is kept
        ("host=a,b target_session_attrs=any", {}),
        ("host=a port=5432", {}),  # one host: nowhere else to go
        ("", {}),
    ],
)
def test_a_multi_host_dsn_asks_for_a_writable_host(dsn: str, expected: dict[str, str]) -> None:
    assert write_session_keywords(parse_dsn(dsn)) == expected


def test_the_environment_s_target_session_attrs_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGTARGETSESSIONATTRS", "prefer-standby")
    assert write_session_keywords(parse_dsn("host=a,b")) == {}


@pytest.fixture
def pools() -> tuple[ConnectionPool[Any], ...]:
    """Two pools, never opened (the test counts their drops, it does not make them)."""
    return tuple(ConnectionPool("host=nowhere.invalid", open=False, name=f"p{n}") for n in (0, 1))


def test_a_pool_is_dropped_once_per_interval(
    pools: tuple[ConnectionPool[Any], ...],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [100.0]
    drained: list[str] = []
    monkeypatch.setattr(failover, "drop_connections", lambda pool: drained.append(pool.name))
    caplog.set_level(logging.INFO, logger="venturi.store")
    watch = PrimaryWatch(clock=lambda: clock[0])
    first, second = pools
    read_only = errors.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction")

    assert not watch.noticed(first, errors.SerializationFailure("x"))
    assert watch.noticed(first, read_only)
    assert not watch.noticed(first, read_only)  # every statement fails alike meanwhile
    assert watch.noticed(second, read_only)  # each pool for itself
    clock[0] += failover.DROP_INTERVAL
    assert not watch.noticed(first, errors.AdminShutdown("terminating connection"))
    assert watch.noticed(first, read_only)
    assert drained == ["p0", "p1", "p0"]
    assert watch.generation == 3  # each drop tells the listeners
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING, logging.INFO, logging.INFO]  # loud once per episode
    assert "the server is read-only (25006): dropping the connections of pool p0" in (
        caplog.records[0].getMessage()
    )


@pytest.mark.parametrize(
    ("server", "writable", "described"),
    [
        (DatabaseServer("db-1", 5432, False, False), True, "db-1:5432 (read-write)"),
        (DatabaseServer("db-2", 5433, True, True), False, "db-2:5433 (a standby: read-only)"),
        (
            DatabaseServer("db-1", 5432, False, True),
            False,
            "db-1:5432 (read-only (default_transaction_read_only))",
        ),
    ],
)
def test_a_server_is_writable_only_as_a_primary_open_to_writes(
    server: DatabaseServer, writable: bool, described: str
) -> None:
    assert server.writable is writable
    assert server.describe() == described


class _Source:
    def __init__(self) -> None:
        self.servers: list[DatabaseServer | Exception] = []
        self.reads = 0

    def server(self) -> DatabaseServer:
        self.reads += 1
        answer = self.servers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.labels["host"], s.labels["port"]): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == "venturi_database_read_write"
    }


def test_the_server_metric_names_the_host_and_whether_it_takes_writes() -> None:
    clock = [0.0]
    source = _Source()
    source.servers = [
        DatabaseServer("db-1", 5432, False, False),
        DatabaseServer("db-1", 5432, False, True),
        StoreUnavailable("down"),
        DatabaseServer("db-2", 5433, False, False),
    ]
    registry = CollectorRegistry()
    registry.register(ServerCollector(source, max_age=5.0, clock=lambda: clock[0]))
    assert _samples(registry) == {("db-1", "5432"): 1.0}
    assert _samples(registry) == {("db-1", "5432"): 1.0} and source.reads == 1  # cached
    clock[0] += 5.0
    assert _samples(registry) == {("db-1", "5432"): 0.0}  # demoted in place
    clock[0] += 5.0
    assert _samples(registry) == {}  # no answer: nothing said (venturi_queue_up says it)
    clock[0] += 5.0
    assert _samples(registry) == {("db-2", "5433"): 1.0}  # the new primary
