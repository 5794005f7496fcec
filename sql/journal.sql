-- Reads a job's journal in the order it was written.
-- Parameters: id. Returns: journal rows in JOURNAL_COLUMNS order.
SELECT id, job_id, kind, run_no, recorded_at, outcome, note, attachment, facts
FROM {journal}
WHERE job_id = %(id)s
ORDER BY id
