-- Reads each job's return value: the attachment of its latest completion.
-- Parameters: ids (uuid[]). Returns: (job id, attachment) for each job that completed.
SELECT DISTINCT ON (job_id) job_id, attachment
FROM {journal}
WHERE job_id = ANY (%(ids)s::uuid[]) AND outcome = 'completed'
ORDER BY job_id, id DESC
