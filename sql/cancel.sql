-- Cancels a pending, waiting or claimed job; a running handler's later settlement is
-- fenced out and its heartbeat sees the lease gone. Its waiting children are settled as
-- children of a cancelled parent, and waiters are woken, in this transaction.
-- Parameters: id, note. Returns: the new status when applied; no row otherwise.
WITH settled AS (
    UPDATE {jobs}
    SET status = 'cancelled', finished_at = now(), claim_expires_at = NULL
    WHERE id = %(id)s AND status IN ('pending', 'claimed', 'waiting')
    RETURNING id, kind, run_count, status, has_children, awaited
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'cancelled', %(note)s FROM settled
),
{jobs_finished}
SELECT status FROM settled CROSS JOIN (SELECT count(*) FROM finished) AS f
