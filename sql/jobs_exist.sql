-- Tells whether any of the given jobs is stored (an enqueue retried after its answer was
-- lost looks for the ids its first attempt wrote).
-- Parameters: ids (uuid[]). Returns: one row if any exists, else none.
SELECT 1 FROM {jobs} WHERE id = ANY(%(ids)s::uuid[]) LIMIT 1
