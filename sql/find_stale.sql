-- Lists claimed jobs whose lease has expired, oldest expiry first (stale-claim index).
-- Parameters: limit. Returns: jobs in JOB_COLUMNS order.
SELECT id, kind, payload, priority, status, created_at, visible_at, run_count, failure_count,
       max_attempts, carry, dedup_key, claimed_by, claim_expires_at, finished_at
FROM {jobs}
WHERE status = 'claimed' AND claim_expires_at < now()
ORDER BY claim_expires_at
LIMIT %(limit)s
