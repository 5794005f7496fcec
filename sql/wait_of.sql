-- Reads what a job waits for: its wait while it is pending in the run that recorded it.
-- Parameters: id. Returns: (what, name, until, since), or no row.
SELECT w.what, w.name, w.until, w.since
FROM {waits} AS w JOIN {jobs} AS j ON j.id = w.job_id
WHERE w.job_id = %(id)s AND j.status = 'pending' AND j.run_count = w.run_no
