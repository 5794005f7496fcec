-- The jobs waiting to run (pending: due now or scheduled later), optionally of one kind,
-- oldest first: what the test assertions of venturi.testing look at.
-- Parameters: kind (nullable). Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE status = 'pending' AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
ORDER BY id
