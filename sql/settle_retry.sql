-- Counts a failure on a claimed run: re-pends it after %(delay)s seconds, or marks it
-- dead once failure_count reaches max_attempts. Fenced by owner, run epoch and status.
-- A re-pended job whose dedup key a newer pending job now holds gives up the key.
-- Parameters: id, owner, run, delay, set_carry (bool), carry (JSON text), note.
-- Returns: the new status when applied; no row when fenced out.
WITH settled AS (
    UPDATE {jobs} AS j
    SET failure_count = j.failure_count + 1,
        status = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN 'dead' ELSE 'pending' END,
        finished_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN now() END,
        visible_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN j.visible_at
                          ELSE now() + make_interval(secs => %(delay)s::float8) END,
        carry = CASE WHEN %(set_carry)s THEN %(carry)s::jsonb ELSE j.carry END,
        claim_expires_at = NULL,
        dedup_key = CASE WHEN j.failure_count + 1 < j.max_attempts AND EXISTS (
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
    SELECT id, kind, run_count, CASE WHEN status = 'dead' THEN 'dead' ELSE 'retried' END,
           %(note)s
    FROM settled
)
SELECT settled.status
FROM settled
-- The condition sits inside the lateral subquery: a join's ON clause would still call
-- pg_notify for a job that went dead, waking every worker for nothing.
LEFT JOIN LATERAL (
    SELECT pg_notify({channel}, settled.kind) WHERE settled.status = 'pending'
) AS n ON true
