-- Reads one job by id.
-- Parameters: id. Returns: the job in JobRecord.from_row order, or no row.
SELECT {job_columns}
FROM {jobs}
WHERE id = %(id)s
