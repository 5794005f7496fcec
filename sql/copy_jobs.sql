-- Writes new jobs due now (no dedup key, no delay, no parents) in one binary COPY: the
-- fastest way into the table, with no statement to plan and no arrays to unpack. The
-- rows' visible_at and created_at take their defaults (now(), database time).
-- Parameters: none; each row is (id, kind, payload, priority, max_attempts,
-- concurrency_key, trace_context, fair_tag) in the COPY data, the tag as fair_bases.sql
-- gave it (NULL for a kind that is not fair). Returns: nothing (the rows copied).
COPY {jobs} (id, kind, payload, priority, max_attempts, concurrency_key, trace_context,
             fair_tag)
FROM STDIN (FORMAT BINARY)
