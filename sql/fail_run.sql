-- Counts a failure on a claimed run, for both callers that fail one: a handler's retry
-- (owner, run) and the reaper taking back a claim whose lease expired (lapsed: only
-- then, so a heartbeat or settlement that got there first wins). The job re-pends after
-- %(delay)s seconds (giving up a dedup key a newer pending job holds), or goes dead once
-- failure_count reaches max_attempts, so a job that kills its worker cannot loop forever.
-- Parameters: id, owner, run, lapsed (bool), delay, set_carry (bool), carry (JSON text), note,
-- facts (fragment run_facts; the reaper's say the run was lost).
-- Returns: the journal outcome (retried, recovered or dead) when applied; one NULL when
-- another session held the row locked (nothing changed; try again); no row when fenced out.
WITH batch AS {one_run},
{locked_runs},
settled AS (
    UPDATE {jobs} AS j
    SET failure_count = j.failure_count + 1,
        status = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN 'dead' ELSE 'pending' END,
        finished_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN now() END,
        visible_at = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN j.visible_at
                          ELSE now() + make_interval(secs => %(delay)s::float8) END,
        carry = CASE WHEN %(set_carry)s THEN %(carry)s::jsonb ELSE j.carry END,
        claim_expires_at = NULL,
        dedup_key = CASE WHEN j.failure_count + 1 >= j.max_attempts THEN j.dedup_key
                         ELSE {dedup_key_kept} END
    FROM locked
    WHERE j.id = locked.id AND (NOT %(lapsed)s OR j.claim_expires_at < now())
    RETURNING j.id, j.kind, j.run_count, j.status, j.has_children, j.awaited
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, facts)
    SELECT id, kind, run_count,
           CASE WHEN status = 'dead' THEN 'dead' WHEN %(lapsed)s THEN 'recovered'
                ELSE 'retried' END,
           %(note)s || CASE WHEN status = 'dead' AND %(lapsed)s THEN '; max_attempts reached'
                            ELSE '' END,
           {run_facts}
    FROM settled
    RETURNING kind, outcome
),
-- A job that went dead settles its waiting children and wakes its waiters.
{jobs_finished}
SELECT journaled.outcome
FROM journaled
CROSS JOIN (SELECT count(*) FROM finished) AS f
-- The condition sits inside the lateral subquery: a join's ON clause would still call
-- pg_notify for a job that went dead, waking every worker for nothing.
LEFT JOIN LATERAL (
    SELECT pg_notify({channel}, journaled.kind) WHERE journaled.outcome <> 'dead'
) AS n ON true
UNION ALL
SELECT NULL FROM ({busy_runs}) AS busy
