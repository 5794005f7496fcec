-- Records one step of a durable run, fenced like a settlement: only while the run still
-- holds its claim (owner, run epoch, claimed), whose row it share-locks so a recovery or
-- a cancel cannot slip between the fence and the commit.
-- Parameters: id, owner, run, name, seq, result (JSON text or null).
-- Returns: recorded_at when recorded; no row when the run lost its claim.
WITH held AS (
    {held_run_locked}
)
INSERT INTO {steps} (job_id, name, seq, run_no, result)
SELECT id, %(name)s, %(seq)s, %(run)s, %(result)s::jsonb FROM held
RETURNING recorded_at
