-- Records what a durable run is about to wait for, fenced like a step (the run still
-- holds its claim); a job has one wait, the latest run's.
-- Parameters: id, owner, run, what ('sleep', 'signal', 'job'), name, until.
-- Returns: one row when recorded; no row when the run lost its claim.
WITH held AS (
    {held_run_locked}
)
INSERT INTO {waits} AS w (job_id, run_no, what, name, until)
SELECT id, %(run)s, %(what)s, %(name)s, %(until)s FROM held
ON CONFLICT (job_id) DO UPDATE
SET run_no = excluded.run_no, what = excluded.what, name = excluded.name,
    until = excluded.until, since = now()
RETURNING w.job_id
