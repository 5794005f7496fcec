-- Reads every signal sent to a job, oldest first.
-- Parameters: id. Returns: (name, payload, sent_at) per signal.
SELECT name, payload, sent_at
FROM {signals}
WHERE job_id = %(id)s
ORDER BY id
