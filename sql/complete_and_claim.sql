-- Completes one run of a kind with a concurrency limit (and no key or rate limit) and, only
-- if that applied, claims the kind's next due job for the same worker, in one statement:
-- the run's place passes straight on, never free in between. The statement turns one
-- claimed job of the kind into a completed one and at most one pending job into a claimed
-- one, atomically, so no snapshot ever sees more of the kind claimed than before it: the
-- kind's limit holds without taking its turn (its row's lock), which the claims that add
-- to the kind's claimed jobs still take. Its room is read from this statement's snapshot,
-- where the run is still claimed: a kind whose limit was lowered below its claimed jobs,
-- paused, or whose declaration now has a key or rate limit gets nothing passed on.
-- Parameters: ids, owners, runs, attachments, notes (one run, as settle_complete.sql), kind,
-- lease, priority_floor.
-- Returns one row: whether the completion applied, whether the run's row was locked by
-- another session (nothing changed; neither: fenced out), then the claimed job's columns
-- (JobRecord.from_row order; all NULL when none was claimed).
WITH batch AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(owners)b::text[], %(runs)b::integer[],
                         %(attachments)b::jsonb[], %(notes)b::text[])
        AS b (id, owner, run, attachment, note)
),
{locked_runs},
settled AS (
    UPDATE {jobs} AS j
    SET status = 'completed', finished_at = now(), claim_expires_at = NULL
    FROM locked JOIN batch AS b ON b.id = locked.id
    WHERE j.id = locked.id
    RETURNING j.id, j.kind, j.run_count, j.claimed_by, b.attachment, b.note
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment)
    SELECT id, kind, run_count, 'completed', note, attachment FROM settled
),
room AS (
    SELECT settled.claimed_by AS worker,
           k.concurrency - (
               SELECT count(*) FROM {jobs} AS r
               WHERE r.status = 'claimed' AND r.kind = k.kind) AS left_after_run
    FROM settled
    JOIN {kinds} AS k ON k.kind = settled.kind
    WHERE k.kind = %(kind)s AND NOT k.paused
      AND k.key_concurrency IS NULL AND k.rate_limit IS NULL
),
next_job AS (
    SELECT room.worker AS next_worker, n.id AS next_id
    FROM room
    CROSS JOIN LATERAL (
        SELECT j.id FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = %(kind)s
          AND j.priority >= %(priority_floor)s AND j.visible_at <= now()
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS n
    WHERE room.left_after_run >= 0
),
claimed AS (
    UPDATE {jobs} AS j
    SET status = 'claimed',
        claimed_by = next_job.next_worker,
        run_count = j.run_count + 1,
        claim_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
    FROM next_job
    WHERE j.id = next_job.next_id
    RETURNING {job_columns}
)
SELECT EXISTS (SELECT FROM settled),
       EXISTS ({busy_runs}),
       claimed.*
FROM (SELECT) AS one
LEFT JOIN claimed ON true
