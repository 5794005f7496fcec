-- Reads a job's parents and the return value of each one's latest completion (null for a
-- parent that did not complete). Parameters: id. Returns: (parent id, attachment) rows.
SELECT d.parent_id, r.attachment
FROM {deps} AS d
LEFT JOIN LATERAL (
    SELECT attachment FROM {journal}
    WHERE job_id = d.parent_id AND outcome = 'completed'
    ORDER BY id DESC
    LIMIT 1
) AS r ON true
WHERE d.child_id = %(id)s
ORDER BY d.parent_id
