-- Cancels a pending, waiting or claimed job; a running handler's later settlement is
-- fenced out and its heartbeat sees the lease gone. Its waiting children are settled as
-- children of a cancelled parent, and waiters are woken, in this transaction.
-- Parameters: id, note. Returns: the new status when applied; no row otherwise.
WITH cancelled AS (
    UPDATE {jobs}
    SET status = 'cancelled', finished_at = now(), claim_expires_at = NULL
    WHERE id = %(id)s AND status IN ('pending', 'claimed', 'waiting')
    RETURNING id, kind, run_count, status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'cancelled', %(note)s FROM cancelled
),
finished AS (
    SELECT {finish_children}(array_agg(id), 'cancelled'), pg_notify({done_channel}, '')
    FROM cancelled
    HAVING count(*) > 0
)
SELECT status FROM cancelled CROSS JOIN (SELECT count(*) FROM finished) AS f
