-- The unfinished jobs holding a dedup key (of one kind, or any), newest first: pending
-- ones read from the dedup index and running ones from the claimed index, so the search
-- never scans the finished history (which no index covers by key).
-- Parameters: dedup_key, kind (nullable), limit. Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM (
    SELECT {job_columns}
    FROM {jobs}
    WHERE status = 'pending' AND dedup_key IS NOT NULL AND dedup_key = %(dedup_key)s
      AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
    UNION ALL
    SELECT {job_columns}
    FROM {jobs}
    WHERE status = 'claimed' AND dedup_key = %(dedup_key)s
      AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
) AS holders
ORDER BY id DESC
LIMIT %(limit)s
