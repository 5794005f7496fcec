-- Marks a job awaited, so that the transaction finishing it notifies the channel of
-- finished jobs (no other does); run by a waiter once it LISTENs. An UPDATE waits for
-- the row's lock: a finishing transaction holding it commits first, and the job is then
-- found finished and left unmarked; one that comes later sees the mark.
-- Parameters: id. Returns: the job (JobRecord.from_row order) when this statement marked
-- it; no row for a job finished, already marked or unknown (the caller reads it then).
UPDATE {jobs}
SET awaited = true
WHERE id = %(id)s AND NOT awaited AND finished_at IS NULL
RETURNING {job_columns}
