-- Marks a claimed run dead at once (poison input). Fenced by owner, run epoch, status.
-- Parameters: id, owner, run, note, facts (fragment run_facts). Returns: the journal outcome when applied.
-- Its waiting children are settled as children of a dead parent, and its waiters woken.
WITH settled AS (
    UPDATE {jobs} AS j
    SET status = 'dead', finished_at = now(), claim_expires_at = NULL
    FROM {one_run} AS b
    WHERE {held_by_run}
    RETURNING j.id, j.kind, j.run_count, j.status, j.has_children, j.awaited
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, facts)
    SELECT id, kind, run_count, 'dead', %(note)s, {run_facts} FROM settled
    RETURNING kind, outcome
),
{jobs_finished}
SELECT outcome FROM journaled CROSS JOIN (SELECT count(*) FROM finished) AS f
