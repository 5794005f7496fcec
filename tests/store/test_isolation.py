"""Two prefixes in one database never see each other's rows or notifications."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from tests.support import Listener, Probe, drop_prefix, fresh_prefix
from venturi.models import CleanupCriteria, HistoryFilter, NewJob
from venturi.store.postgres import PostgresStore


def test_two_prefixes_share_nothing(
    store: PostgresStore,
    make_store: Callable[..., PostgresStore],
    database_dsn: str,
    listener: Listener,
) -> None:
    other_name = fresh_prefix("other")
    try:
        other = make_store(other_name)
        other.migrate()
        other_listener = Listener(database_dsn, other.prefix.channel)
        try:
            mine = store.enqueue(NewJob("shared.kind", {"who": "mine"}, dedup_key="d"))
            theirs = other.enqueue(NewJob("shared.kind", {"who": "theirs"}, dedup_key="d"))
            assert mine != theirs, "dedup merged across prefixes"
            assert listener.until_marker() == ["shared.kind"]
            assert other_listener.until_marker() == ["shared.kind"]

            assert store.reads.get(theirs) is None and other.reads.get(mine) is None
            assert [j.id for j in store.reads.history(HistoryFilter())] == [mine]
            assert store.reads.stats().total("pending") == 1
            [claimed] = store.claim("w", {"shared.kind": 30}, 10)
            assert claimed.id == mine
            assert store.cancel(theirs) is False
            assert store.cleanup(CleanupCriteria(datetime(2100, 1, 1, tzinfo=UTC))) == 0
            assert other.cancel(theirs) is True
            assert store.cleanup(CleanupCriteria(datetime(2100, 1, 1, tzinfo=UTC))) == 0
            assert other.cleanup(CleanupCriteria(datetime(2100, 1, 1, tzinfo=UTC))) == 1
            assert listener.until_marker() == []
            probe = Probe(database_dsn, store.prefix.name)
            try:
                assert probe.count("jobs") == 1
            finally:
                probe.close()
        finally:
            other_listener.close()
    finally:
        drop_prefix(database_dsn, other_name)
