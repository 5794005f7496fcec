-- Reads one job by id.
-- Parameters: id. Returns: the job in JOB_COLUMNS order, or no row.
SELECT id, kind, payload, priority, status, created_at, visible_at, run_count, failure_count,
       max_attempts, carry, dedup_key, claimed_by, claim_expires_at, finished_at
FROM {jobs}
WHERE id = %(id)s
