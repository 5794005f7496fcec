-- The jobs holding a dedup key (of one kind, or any), newest first.
-- Parameters: dedup_key, kind (nullable), limit. Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE dedup_key = %(dedup_key)s AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
ORDER BY id DESC
LIMIT %(limit)s
