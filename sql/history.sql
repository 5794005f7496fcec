-- One keyset page of jobs, newest first by id, optionally filtered. The id is a ULID:
-- enqueue time to the millisecond by the enqueuing host's clock, then the order one
-- process made its ids in. The primary key is walked backwards from the cursor without
-- OFFSET; ids are unique, so no row is skipped or repeated across pages.
-- Parameters: kind, status, finished_since, finished_until, before_id (all nullable),
-- limit. Returns: jobs in JobRecord.from_row order.
SELECT {job_columns}
FROM {jobs}
WHERE (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(finished_since)s::timestamptz IS NULL OR finished_at >= %(finished_since)s::timestamptz)
  AND (%(finished_until)s::timestamptz IS NULL OR finished_at < %(finished_until)s::timestamptz)
  AND (%(before_id)s::uuid IS NULL OR id < %(before_id)s::uuid)
ORDER BY id DESC
LIMIT %(limit)s
