-- Puts a finished job (dead, cancelled or completed) back in line with a fresh failure
-- count, visible now. A dedup key already held by another pending job raises a unique
-- violation, which the store reports as DuplicateJob.
-- Parameters: id, note. Returns: the new status when applied; no row otherwise.
WITH requeued AS (
    UPDATE {jobs}
    SET status = 'pending', failure_count = 0, visible_at = now(), finished_at = NULL,
        claimed_by = NULL, claim_expires_at = NULL
    WHERE id = %(id)s AND status IN ('dead', 'cancelled', 'completed')
    RETURNING id, kind, run_count, status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'requeued', %(note)s FROM requeued
)
SELECT requeued.status
FROM requeued CROSS JOIN LATERAL (SELECT pg_notify({channel}, requeued.kind)) AS n
