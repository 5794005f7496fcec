-- Cancels a pending or claimed job; a running handler's later settlement is fenced out
-- and its heartbeat sees the lease gone.
-- Parameters: id, note. Returns: the new status when applied; no row otherwise.
WITH cancelled AS (
    UPDATE {jobs}
    SET status = 'cancelled', finished_at = now(), claim_expires_at = NULL
    WHERE id = %(id)s AND status IN ('pending', 'claimed')
    RETURNING id, kind, run_count, status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'cancelled', %(note)s FROM cancelled
)
SELECT status FROM cancelled
