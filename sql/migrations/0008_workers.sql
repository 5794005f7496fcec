-- The worker registry: one row per running worker, written by its heartbeat thread
-- (inserted at its first beat, refreshed at every beat, deleted when it stops). A row not
-- refreshed for three beats and half a minute belongs to a worker that died; the next
-- beat of any worker of the prefix deletes it.
CREATE TABLE {workers} (
    name        text        NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    kinds       text[]      NOT NULL,
    concurrency integer     NOT NULL,
    running     integer     NOT NULL DEFAULT 0,
    beat_every  float8      NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {workers_pkey} PRIMARY KEY (name)
);

-- Joint statistics of (kind, status), gathered by ANALYZE (autovacuum): the dashboard
-- estimates each kind's finished and waiting jobs from them on a large table instead of
-- counting every row. Statistics cost nothing on enqueue or settle.
CREATE STATISTICS {jobs_kind_status_stats} (mcv) ON kind, status FROM {jobs};
