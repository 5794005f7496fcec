-- Fragment {job_columns}: a job row's columns in `JobRecord.from_row` order.
id, kind, payload, priority, status, created_at, visible_at, run_count, failure_count,
max_attempts, carry, dedup_key, claimed_by, claim_expires_at, finished_at, concurrency_key,
trace_context, parents_left, workflow_id
