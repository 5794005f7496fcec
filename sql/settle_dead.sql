-- Marks a claimed run dead at once (poison input). Fenced by owner, run epoch, status.
-- Parameters: id, owner, run, note. Returns: the new status when applied.
WITH settled AS (
    UPDATE {jobs} AS j
    SET status = 'dead', finished_at = now(), claim_expires_at = NULL
    WHERE j.id = %(id)s AND j.claimed_by = %(owner)s AND j.run_count = %(run)s
      AND j.status = 'claimed'
    RETURNING j.id, j.kind, j.run_count, j.status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'dead', %(note)s FROM settled
)
SELECT status FROM settled
