-- Puts one bounded batch of dead jobs (optionally of one kind) back in line, with a fresh
-- failure count, visible now, journaling each as requeued. Only jobs dead since before
-- %(dead_before)s are taken, so a caller looping until a short batch always finishes.
-- A job whose dedup key a pending job holds stays dead, and of dead jobs sharing a key
-- only the newest returns, so the batch never trips the pending-dedup unique index.
-- Parameters: kind (nullable), dead_before, note, batch. Returns: one row per job requeued.
WITH candidates AS (
    SELECT DISTINCT ON (j.kind, j.dedup_key IS NULL, coalesce(j.dedup_key, j.id::text)) j.id
    FROM {jobs} AS j
    WHERE j.status = 'dead'
      AND j.finished_at < %(dead_before)s
      AND (%(kind)s::text IS NULL OR j.kind = %(kind)s::text)
      AND (j.dedup_key IS NULL OR NOT EXISTS (
             SELECT FROM {jobs} AS p
             WHERE p.kind = j.kind AND p.dedup_key = j.dedup_key AND p.status = 'pending'))
    ORDER BY j.kind, j.dedup_key IS NULL, coalesce(j.dedup_key, j.id::text), j.finished_at DESC
    LIMIT %(batch)s
),
requeued AS (
    UPDATE {jobs} AS j
    SET status = 'pending', failure_count = 0, visible_at = now(), finished_at = NULL,
        claimed_by = NULL, claim_expires_at = NULL
    FROM candidates AS c
    WHERE j.id = c.id AND j.status = 'dead'
    RETURNING j.id, j.kind, j.run_count
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'requeued', %(note)s FROM requeued
)
-- PostgreSQL folds identical notifications of one transaction, so this sends one per kind.
SELECT requeued.id
FROM requeued CROSS JOIN LATERAL (SELECT pg_notify({channel}, requeued.kind)) AS n
