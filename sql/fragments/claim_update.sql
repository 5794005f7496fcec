-- Fragment {claim_update}: the UPDATE of claim.sql and claim_floored.sql: the jobs of
-- the CTE `picked` claimed for %(worker)s, stamped with owner, lease and the next run
-- epoch, returned as {job_columns}.
UPDATE {jobs} AS j
SET status = 'claimed',
    claimed_by = %(worker)s,
    run_count = j.run_count + 1,
    claim_expires_at = now() + make_interval(secs => picked.lease)
FROM picked
WHERE j.id = picked.picked_id
RETURNING {job_columns}
