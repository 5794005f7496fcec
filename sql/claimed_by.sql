-- The jobs claimed now under a worker's name, whatever the worker believes it holds: after
-- a claim whose answer was lost, those it never heard of (the index of claims by owner).
-- Parameters: worker. Returns: jobs in JobRecord.from_row order, by id.
SELECT {job_columns}
FROM {jobs}
WHERE status = 'claimed' AND claimed_by = %(worker)s
ORDER BY id
