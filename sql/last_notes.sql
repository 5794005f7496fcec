-- The latest non-empty journal note of each given job (why a dead job died), in one
-- statement instead of one journal read per job; uses the (job_id, id) journal index.
-- Parameters: ids (uuid[]). Returns: job_id, note, for jobs that have a note.
SELECT DISTINCT ON (job_id) job_id, note
FROM {journal}
WHERE job_id = ANY(%(ids)s::uuid[]) AND note IS NOT NULL AND note <> ''
ORDER BY job_id, id DESC
