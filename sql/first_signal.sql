-- Reads the first signal of a name sent to a job (the one a wait returns).
-- Parameters: id, name. Returns: (payload, sent_at), or no row.
SELECT payload, sent_at
FROM {signals}
WHERE job_id = %(id)s AND name = %(name)s
ORDER BY id
LIMIT 1
