-- Makes a pending job that waits for a later time (scheduled, or backing off after a
-- failure) due now, journaling it as requeued and waking the kind's workers.
-- Parameters: id, note. Returns: the job's id when applied; no row otherwise.
WITH moved AS (
    UPDATE {jobs}
    SET visible_at = now()
    WHERE id = %(id)s AND status = 'pending' AND visible_at > now()
    RETURNING id, kind, run_count
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'requeued', %(note)s FROM moved
)
SELECT moved.id
FROM moved CROSS JOIN LATERAL (SELECT pg_notify({channel}, moved.kind)) AS n
