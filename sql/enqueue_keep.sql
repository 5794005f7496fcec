-- Enqueues a job with a dedup key unless a pending job already holds the key; then the
-- pending job keeps its work and gets a 'merged' journal row. FOR UPDATE re-checks the
-- holder after any concurrent claim, so a job that just left 'pending' is not credited.
-- Parameters: id, kind, payload, priority, delay | at, max_attempts, dedup_key.
-- Returns: (id, created); no row when the holder vanished mid-statement (caller retries).
WITH inserted AS (
    INSERT INTO {jobs} {new_job}
    {pending_key_taken}
    DO NOTHING
    RETURNING id, kind
),
holder AS (
    SELECT id, kind, run_count FROM {jobs}
    WHERE kind = %(kind)s AND dedup_key = %(dedup_key)s AND status = 'pending'
      AND NOT EXISTS (SELECT FROM inserted)
    FOR UPDATE
),
merged AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'merged', 'duplicate enqueue kept the pending job'
    FROM holder
    RETURNING job_id
)
SELECT inserted.id, true
FROM inserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, inserted.kind)) AS n
UNION ALL
SELECT job_id, false FROM merged
