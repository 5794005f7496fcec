-- Takes back a stale claim: fenced by run epoch, status and an expired lease, so a
-- heartbeat or settlement that got there first wins. A lost run counts as a failure;
-- past max_attempts the job is dead, so a job that kills its worker cannot loop forever.
-- A row another session holds locked is skipped, not waited for (the next scan tries
-- again), so one locked row cannot stall the reaper.
-- Parameters: id, run, delay (seconds before it is claimable again).
-- Returns: the new status when applied; no row when fenced out or locked.
WITH target AS (
    SELECT id FROM {jobs}
    WHERE id = %(id)s AND run_count = %(run)s AND status = 'claimed'
      AND claim_expires_at < now()
    FOR UPDATE SKIP LOCKED
),
recovered AS (
    UPDATE {jobs} AS j
    SET failure_count = j.failure_count + 1,
        status = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN 'dead' ELSE 'pending' END,
        finished_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN now() END,
        visible_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN j.visible_at
                          ELSE now() + make_interval(secs => %(delay)s::float8) END,
        claim_expires_at = NULL,
        dedup_key = CASE WHEN j.failure_count + 1 < j.max_attempts AND EXISTS (
                              SELECT FROM {jobs} AS d
                              WHERE d.kind = j.kind AND d.dedup_key = j.dedup_key
                                AND d.status = 'pending')
                         THEN NULL ELSE j.dedup_key END
    FROM target
    WHERE j.id = target.id
    RETURNING j.id, j.kind, j.run_count, j.status, j.claimed_by
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, CASE WHEN status = 'dead' THEN 'dead' ELSE 'recovered' END,
           'lease held by ' || coalesce(claimed_by, '?') || ' expired'
           || CASE WHEN status = 'dead' THEN '; max_attempts reached' ELSE '' END
    FROM recovered
)
SELECT recovered.status
FROM recovered
-- The condition sits inside the lateral subquery: a join's ON clause would still call
-- pg_notify for a job that went dead, waking every worker for nothing.
LEFT JOIN LATERAL (
    SELECT pg_notify({channel}, recovered.kind) WHERE recovered.status = 'pending'
) AS n ON true
