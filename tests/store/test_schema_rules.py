"""The rules the jobs and journal tables keep themselves: statuses, outcomes and
``on_parent_failure`` through domains, ``finished_at`` set exactly for terminal jobs
through a CHECK. Each rule is seen refusing a row that breaks it, and the migration that
moved the rules to domains is seen keeping rows written before it."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg import errors

from tests.support import Probe, migrate_before
from venturi.models import JobStatus, NewJob
from venturi.prefix import Prefix
from venturi.store.migrations import known_migrations
from venturi.store.postgres import PostgresStore

DOMAINS = ("job_status", "parent_failure", "journal_outcome")


def _one_job(store: PostgresStore, probe: Probe) -> str:
    job_id = str(store.enqueue(NewJob("rules")).to_uuid())
    assert probe.count("jobs") == 1
    return job_id


@pytest.mark.parametrize(
    ("assignment", "rule"),
    [
        ("status = 'finished'", "job_status_values"),
        ("status = 'completed'", "jobs_finished_check"),  # without finished_at
        ("finished_at = now()", "jobs_finished_check"),  # while still pending
        ("status = 'dead', finished_at = NULL", "jobs_finished_check"),
        ("on_parent_failure = 'ignore'", "parent_failure_values"),
    ],
)
def test_a_job_row_breaking_a_rule_is_refused(
    store: PostgresStore, probe: Probe, assignment: str, rule: str
) -> None:
    job_id = _one_job(store, probe)
    with pytest.raises(errors.CheckViolation) as refused:
        probe.rows("UPDATE {jobs} SET " + assignment + " WHERE id = %s", job_id)
    assert refused.value.diag.constraint_name == store.prefix.table(rule)
    assert probe.rows("SELECT status, finished_at, on_parent_failure FROM {jobs}") == [
        ("pending", None, None)
    ]


@pytest.mark.parametrize(
    "assignment",
    [
        "status = 'completed', finished_at = now()",
        "status = 'cancelled', finished_at = now()",
        "status = 'claimed'",
        "status = 'waiting', on_parent_failure = 'run'",
        "on_parent_failure = NULL",
    ],
)
def test_rows_within_the_rules_are_written(
    store: PostgresStore, probe: Probe, assignment: str
) -> None:
    job_id = _one_job(store, probe)
    probe.rows("UPDATE {jobs} SET " + assignment + " WHERE id = %s", job_id)


def test_a_journal_outcome_outside_the_list_is_refused(store: PostgresStore, probe: Probe) -> None:
    job_id = _one_job(store, probe)
    insert = "INSERT INTO {journal} (job_id, kind, run_no, outcome) VALUES (%s, 'rules', 0, %s)"
    probe.rows(insert, job_id, "requeued")
    with pytest.raises(errors.CheckViolation) as refused:
        probe.rows(insert, job_id, "finished")
    assert refused.value.diag.constraint_name == store.prefix.table("journal_outcome_values")
    assert probe.rows("SELECT outcome FROM {journal}") == [("requeued",)]


def test_the_rules_are_validated_and_status_reads_as_text(
    store: PostgresStore, probe: Probe
) -> None:
    names = [
        store.prefix.table(rule)
        for rule in (
            "job_status_values",
            "parent_failure_values",
            "journal_outcome_values",
            "jobs_finished_check",
        )
    ]
    rows = probe.rows(
        "SELECT conname, convalidated FROM pg_constraint WHERE conname = ANY (%s)", names
    )
    assert sorted(rows) == sorted((name, True) for name in names)
    job_id = _one_job(store, probe)
    with probe.conn.cursor() as cur:
        cur.execute(
            psycopg.sql.SQL("SELECT status, on_parent_failure FROM {} WHERE id = %s").format(
                psycopg.sql.Identifier(store.prefix.jobs)
            ),
            (job_id,),
        )
        assert cur.description is not None
        # A domain's values reach clients under its base type's oid: plain text.
        assert [column.type_code for column in cur.description] == [25, 25]
        assert cur.fetchone() == ("pending", None)
    record = store.reads.get(store.enqueue(NewJob("rules")))
    assert record is not None and record.status is JobStatus.PENDING


def _domains(dsn: str, prefix: Prefix) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT typname FROM pg_type WHERE typtype = 'd' AND typname = ANY (%s) ORDER BY 1",
            ([prefix.table(d) for d in DOMAINS],),
        ).fetchall()
    return [r[0] for r in rows]


def test_dropping_a_prefix_drops_its_domains(store: PostgresStore, database_dsn: str) -> None:
    assert _domains(database_dsn, store.prefix) == sorted(store.prefix.table(d) for d in DOMAINS)
    store.drop_prefix()
    assert _domains(database_dsn, store.prefix) == []


def test_the_move_to_domains_keeps_the_rows_written_before_it(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    """A prefix migrated by the code before 0010, with jobs in every status and journal
    rows, migrates to domains with every row as it was and every rule in force."""
    later = [name for _, name in known_migrations() if name >= "0010"]
    assert migrate_before(database_dsn, prefix, "0010") == "0010_status_domains"
    probe = Probe(database_dsn, prefix)
    try:
        probe.rows(
            "INSERT INTO {jobs} (id, kind, status, finished_at, on_parent_failure)"
            " SELECT gen_random_uuid(), 'old', s,"
            "  CASE WHEN s IN ('completed', 'dead', 'cancelled') THEN now() END,"
            "  CASE WHEN s = 'waiting' THEN 'run' END"
            " FROM unnest(%s::text[]) AS s",
            [status.value for status in JobStatus],
        )
        probe.rows(
            "INSERT INTO {journal} (job_id, kind, run_no, outcome)"
            " SELECT id, kind, 1, 'completed' FROM {jobs} WHERE status = 'completed'"
        )
        before = probe.rows("SELECT id, status, finished_at, on_parent_failure FROM {jobs}")
        store = make_store(prefix)
        assert store.migrate() == later
        after = probe.rows("SELECT id, status, finished_at, on_parent_failure FROM {jobs}")
        assert sorted(after) == sorted(before)
        assert probe.rows("SELECT outcome FROM {journal}") == [("completed",)]
        assert probe.count("jobs", "status = 'pending'") == 1  # the claim index's rows
        with pytest.raises(errors.CheckViolation):
            probe.rows("UPDATE {jobs} SET status = 'finished' WHERE kind = 'old'")
        store.check_schema()
    finally:
        probe.close()
