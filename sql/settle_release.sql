-- Hands a claimed job back untouched: pending again at its old place in line, no failure
-- counted. Used for prefetched jobs that never started and for a stopping worker.
-- Parameters: id, owner, run, note. Returns: the new status when applied.
WITH settled AS (
    UPDATE {jobs} AS j
    SET status = 'pending', claimed_by = NULL, claim_expires_at = NULL,
        dedup_key = CASE WHEN EXISTS (
                              SELECT FROM {jobs} AS d
                              WHERE d.kind = j.kind AND d.dedup_key = j.dedup_key
                                AND d.status = 'pending')
                         THEN NULL ELSE j.dedup_key END
    WHERE j.id = %(id)s AND j.claimed_by = %(owner)s AND j.run_count = %(run)s
      AND j.status = 'claimed'
    RETURNING j.id, j.kind, j.run_count, j.status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'released', %(note)s FROM settled
)
SELECT settled.status
FROM settled CROSS JOIN LATERAL (SELECT pg_notify({channel}, settled.kind)) AS n
