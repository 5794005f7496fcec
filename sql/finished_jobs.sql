-- Reads which of the jobs a process waits for have finished (one probe of the primary key
-- per id, for every waiter of the process at once).
-- Parameters: ids (uuid[]). Returns: the finished ones in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE id = ANY (%(ids)s::uuid[]) AND finished_at IS NOT NULL
