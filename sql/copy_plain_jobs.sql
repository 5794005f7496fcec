-- Writes new jobs due now (no dedup key, no delay, no parents) in one binary COPY, like
-- copy_jobs.sql, for a batch whose every job takes the table's defaults for all but its
-- id, kind and payload: priority 0, 5 attempts, no concurrency key, no trace context and
-- no fair tag (a kind that is not fair). The rows' visible_at and created_at take their
-- defaults (now(), database time).
-- Parameters: none; each row is (id, kind, payload) in the COPY data. Returns: nothing.
COPY {jobs} (id, kind, payload)
FROM STDIN (FORMAT BINARY)
