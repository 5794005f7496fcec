-- Re-pends a claimed run without counting a failure, visible at %(at)s or after
-- %(delay)s seconds, optionally storing a new carry. Fenced by owner, run epoch, status.
-- Parameters: id, owner, run, delay, at, set_carry, carry, note, facts
-- (fragment run_facts).
-- Returns: the journal outcome when applied; no row when fenced out.
WITH settled AS (
    UPDATE {jobs} AS j
    SET status = 'pending',
        visible_at = coalesce(%(at)s::timestamptz,
                              now() + make_interval(secs => coalesce(%(delay)s::float8, 0))),
        carry = CASE WHEN %(set_carry)s THEN %(carry)s::jsonb ELSE j.carry END,
        claim_expires_at = NULL,
        dedup_key = {dedup_key_kept}
    FROM {one_run} AS b
    WHERE {held_by_run}
    RETURNING j.id, j.kind, j.run_count, j.status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, facts)
    SELECT id, kind, run_count, 'paused', %(note)s, {run_facts} FROM settled
    RETURNING kind, outcome
)
SELECT journaled.outcome
FROM journaled CROSS JOIN LATERAL (SELECT pg_notify({channel}, journaled.kind)) AS n
