-- Locks the job a signal goes to, before anything is written: a settlement of its run
-- (which skips locked rows) waits, so the signal's next statement reads the job as that
-- settlement left it, and the run's own check after settling reads the signal.
-- Parameters: id. Returns: (status, kind, run_count), or no row for an unknown job.
SELECT status, kind, run_count
FROM {jobs}
WHERE id = %(id)s
FOR NO KEY UPDATE
