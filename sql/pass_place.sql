-- Claims the next due job of a kind with a concurrency limit (and no key or rate limit)
-- for the worker whose run of it settle.sql completed earlier in this same
-- transaction: the run's place passes straight on, never free in between. The transaction
-- turns one claimed job of the kind into a completed one and at most one pending job into
-- a claimed one, atomically, so no snapshot ever sees more of the kind claimed than before
-- it: the kind's limit holds without taking its turn (its row's lock), which the claims
-- that add to the kind's claimed jobs still take. The room is read after the completion
-- (this transaction's own run no longer counts): a kind whose limit was lowered below its
-- claimed jobs, paused, or whose declaration now has a key or rate limit or is fair (its
-- next job is the one with the smallest tag, which the limited claim finds) gets nothing.
-- Nothing is claimed unless that completion applied: the run's row must be completed by
-- this very transaction (its version's xmin is this transaction's id), not found
-- completed already by an earlier one (a completion retried after a lost reply).
-- When that completion applied and no job took its place, the place is free: every worker
-- hears of it on the kind's channel (settle.sql, run without `announce`, left that here).
-- Parameters: id (the completed run's job), kind, worker, lease, priority_floor.
-- Returns: the claimed job (JobRecord.from_row order), or no row.
WITH completed_here AS (
    SELECT j.kind FROM {jobs} AS j
    WHERE j.id = %(id)s AND j.status = 'completed' AND j.xmin = pg_current_xact_id()::xid
),
room AS (
    SELECT k.concurrency - (
               SELECT count(*) FROM {jobs} AS r
               WHERE r.status = 'claimed' AND r.kind = k.kind) AS places
    FROM {kinds} AS k
    JOIN completed_here ON completed_here.kind = k.kind
    WHERE k.kind = %(kind)s AND NOT k.paused AND NOT k.fair
      AND k.key_concurrency IS NULL AND k.rate_limit IS NULL
),
next_job AS (
    SELECT n.id AS next_id
    FROM room
    CROSS JOIN LATERAL (
        SELECT j.id FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = %(kind)s
          AND j.priority >= %(priority_floor)s AND j.visible_at <= now()
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS n
    WHERE room.places > 0
),
passed AS (
    UPDATE {jobs} AS j
    SET status = 'claimed',
        claimed_by = %(worker)s,
        run_count = j.run_count + 1,
        claim_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
    FROM next_job
    WHERE j.id = next_job.next_id
    RETURNING {job_columns}
),
announced AS (
    SELECT pg_notify({channel}, %(kind)s)
    FROM completed_here
    WHERE NOT EXISTS (SELECT FROM passed)
)
SELECT passed.* FROM passed WHERE (SELECT count(*) FROM announced) >= 0
