-- Per-kind counts by status and the age of the oldest due pending job, in one scan.
-- Parameters: none. Returns: kind, pending (due), scheduled (future), claimed, completed,
-- dead, cancelled, oldest_pending_seconds, the database time as taken_at, paused, and
-- waiting (for unfinished parents).
SELECT kind,
       count(*) FILTER (WHERE status = 'pending' AND visible_at <= now()),
       count(*) FILTER (WHERE status = 'pending' AND visible_at > now()),
       count(*) FILTER (WHERE status = 'claimed'),
       count(*) FILTER (WHERE status = 'completed'),
       count(*) FILTER (WHERE status = 'dead'),
       count(*) FILTER (WHERE status = 'cancelled'),
       extract(epoch FROM now() - min(visible_at)
                             FILTER (WHERE status = 'pending' AND visible_at <= now()))::float8,
       now(),
       EXISTS (SELECT FROM {kinds} AS k WHERE k.kind = j.kind AND k.paused),
       count(*) FILTER (WHERE status = 'waiting')
FROM {jobs} AS j
GROUP BY kind
ORDER BY kind
