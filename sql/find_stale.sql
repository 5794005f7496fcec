-- Lists claimed jobs whose lease has expired, oldest expiry first (stale-claim index).
-- Parameters: limit. Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE status = 'claimed' AND claim_expires_at < now()
ORDER BY claim_expires_at
LIMIT %(limit)s
