"""Canvas examples of Celery's user guide ("Canvas: Designing Work-flows"), as written
there but for the imports, run by a real worker as one venturi workflow each."""

from __future__ import annotations

import pytest

from venturi.contrib.celery import TaskRevokedError, chain, chord, group, signature

from .conftest import StartWorker
from .demoapp.tasks import add, mul, xsum
from .proj import tasks
from .proj.celery import app

APP = "tests.contrib.celery.proj.celery:app"


def test_partial_signatures(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    partial = add.s(2)
    assert partial.delay(4).get(timeout=60) == 6  # 4 + 2: call arguments come first
    assert add.s(2, 2)() == 4  # a signature called runs inline
    assert app.signature(add.name, args=(1, 1)).delay().get(timeout=60) == 2
    assert signature(add.name, args=(2, 3)).delay().get(timeout=60) == 5
    assert signature(add, args=(3, 3))() == 6


def test_chains_pass_each_result_on(celery_worker: StartWorker) -> None:
    celery_worker(APP, "-c", "4")
    res = chain(add.s(4, 4), mul.s(8), mul.s(10))()
    assert res.get(timeout=60) == 640
    assert res.parent is not None and res.parent.get(timeout=5) == 64
    assert res.parent.parent is not None and res.parent.parent.get(timeout=5) == 8
    piped = (add.s(2, 2) | mul.s(8) | mul.s(10)).apply_async()
    assert piped.get(timeout=60) == 320
    linked = add.apply_async((2, 2), link=mul.s(16))
    assert linked.get(timeout=60) == 64
    immutable = (add.s(2, 2) | add.si(4, 4)).delay()
    assert immutable.get(timeout=60) == 8


def test_groups_and_chords(celery_worker: StartWorker) -> None:
    celery_worker(APP, "-c", "4")
    res = group(add.s(i, i) for i in range(10))()
    assert res.get(timeout=60) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert res.ready() and res.successful() and res.completed_count() == 10
    assert chord((add.s(i, i) for i in range(10)), xsum.s())().get(timeout=60) == 90
    assert chord(add.s(i, i) for i in range(10))(xsum.s()).get(timeout=60) == 90
    upgraded = (group(add.s(i, i) for i in range(10)) | xsum.s()).delay()
    assert upgraded.get(timeout=60) == 90
    mixed = chain(add.s(4, 4), group(add.s(i) for i in range(3)), xsum.s())()
    assert mixed.get(timeout=60) == 8 * 3 + 0 + 1 + 2


def test_a_failed_step_revokes_what_follows(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    res = (tasks.explode.si("broken link") | add.s(1)).delay()
    with pytest.raises(TaskRevokedError):
        res.get(timeout=60)
    assert res.parent is not None and res.parent.state == "FAILURE"
    assert res.state == "REVOKED"


def test_a_canvas_is_written_in_one_transaction(celery_env: str, database_dsn: str) -> None:
    import psycopg

    queue = app.venturi_queue()
    with psycopg.connect(database_dsn) as conn:
        res = chain(add.s(1, 1), mul.s(2)).apply_async(conn=conn)
        conn.rollback()
    assert queue.get(res.id) is None and res.parent is not None
    assert queue.get(res.parent.id) is None
