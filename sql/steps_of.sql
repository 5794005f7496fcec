-- Reads the steps a job's runs recorded, in the order they were reached.
-- Parameters: id.
-- Returns: (name, seq, run_no, result, recorded_at, result size in bytes) per step.
SELECT name, seq, run_no, result, recorded_at, octet_length(result::text)
FROM {steps}
WHERE job_id = %(id)s
ORDER BY seq
