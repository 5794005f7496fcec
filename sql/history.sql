-- One keyset page of jobs, newest first by (created_at, id), optionally filtered.
-- Row comparison against the cursor walks the history index without OFFSET, so equal
-- created_at values are neither skipped nor repeated.
-- Parameters: kind, status, finished_since, finished_until, before_created_at,
-- before_id (all nullable), limit. Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(finished_since)s::timestamptz IS NULL OR finished_at >= %(finished_since)s::timestamptz)
  AND (%(finished_until)s::timestamptz IS NULL OR finished_at < %(finished_until)s::timestamptz)
  AND (%(before_created_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_created_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s
