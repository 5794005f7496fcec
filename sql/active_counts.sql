-- Exact counts of the jobs that are not finished and not waiting, per kind, read from the
-- partial indexes of pending and claimed rows only (as many as the queue's backlog and
-- its workers' slots, never the finished history): due and scheduled pending jobs, the
-- oldest due job's wait, and claimed jobs. Also the database time.
-- Parameters: none. Returns: kind, pending (due), scheduled, claimed,
-- oldest_pending_seconds, taken_at.
WITH pending AS (
    SELECT kind,
           count(*) FILTER (WHERE visible_at <= now()) AS due,
           count(*) FILTER (WHERE visible_at > now()) AS scheduled,
           min(visible_at) FILTER (WHERE visible_at <= now()) AS oldest
    FROM {jobs}
    WHERE status = 'pending'
    GROUP BY kind
),
claimed AS (
    SELECT kind, count(*) AS n FROM {jobs} WHERE status = 'claimed' GROUP BY kind
)
SELECT coalesce(p.kind, c.kind), coalesce(p.due, 0), coalesce(p.scheduled, 0),
       coalesce(c.n, 0), extract(epoch FROM now() - p.oldest)::float8, now()
FROM pending AS p FULL JOIN claimed AS c ON c.kind = p.kind
ORDER BY 1
