-- Status values kept by domains instead of table CHECKs. PostgreSQL rebuilds a table's
-- CHECK from its stored form for every statement that writes the table: the jobs CHECK
-- of 0007 (about 3,300 characters stored) made each INSERT, claim and settlement of a
-- job cost about 8 us more server time (an enqueue's INSERT 36 against 28 us), and the
-- journal's CHECK each journal INSERT about 7. A domain's check is compiled once per
-- session, in the type cache. The rules are unchanged: the same statuses, outcomes and
-- on_parent_failure values, and finished_at set exactly for terminal jobs (the one CHECK
-- left, short since the domain lists the statuses).
-- The domains start without checks, so the columns change type without a rewrite; the
-- partial indexes on status are rebuilt and the checks then read every row (about 1 s per
-- million jobs on a 2-core machine), all under the tables' exclusive locks, which the
-- migration holds until it commits. Column statistics are gathered again at the end,
-- since the type change drops status's (and the (kind, status) statistics').
CREATE DOMAIN {job_status} AS text;
CREATE DOMAIN {parent_failure} AS text;
CREATE DOMAIN {journal_outcome} AS text;

ALTER TABLE {jobs}
    DROP CONSTRAINT {jobs_status_check},
    ALTER COLUMN status TYPE {job_status},
    ALTER COLUMN on_parent_failure TYPE {parent_failure};
ALTER TABLE {journal}
    DROP CONSTRAINT {journal_outcome_check},
    ALTER COLUMN outcome TYPE {journal_outcome};

ALTER DOMAIN {job_status} ADD CONSTRAINT {job_status_values}
    CHECK (VALUE IN ('pending', 'claimed', 'completed', 'dead', 'cancelled', 'waiting'));
ALTER DOMAIN {parent_failure} ADD CONSTRAINT {parent_failure_values} CHECK (VALUE = 'run');
ALTER DOMAIN {journal_outcome} ADD CONSTRAINT {journal_outcome_values} CHECK (VALUE IN (
    'completed', 'retried', 'paused', 'dead', 'released',
    'recovered', 'merged', 'cancelled', 'requeued'));
ALTER TABLE {jobs} ADD CONSTRAINT {jobs_finished_check}
    CHECK ((finished_at IS NOT NULL) = (status IN ('completed', 'dead', 'cancelled')));

ANALYZE {jobs};
