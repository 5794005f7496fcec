-- The keys of the fair kinds with the most due jobs: for each fair kind (of %(kinds)s, or
-- every one when it is NULL), its top %(limit)s keys by due pending jobs, with their
-- running (claimed) jobs. A null key (the jobs without one) is listed as NULL. Reads the
-- kinds' unfinished jobs once.
-- Parameters: kinds (text[] or NULL), limit. Returns: kind, key, due, running, by kind,
-- then most due first.
SELECT ranked.kind, ranked.key, ranked.due, ranked.running
FROM (
    SELECT counted.*,
           row_number() OVER (
               PARTITION BY counted.kind
               ORDER BY counted.due DESC, counted.running DESC, counted.key) AS nth
    FROM (
        SELECT j.kind, j.concurrency_key AS key,
               count(*) FILTER (WHERE j.status = 'pending' AND j.visible_at <= now()) AS due,
               count(*) FILTER (WHERE j.status = 'claimed') AS running
        FROM {jobs} AS j
        JOIN {kinds} AS k ON k.kind = j.kind AND k.fair
        WHERE j.status IN ('pending', 'claimed')
          AND (%(kinds)s::text[] IS NULL OR j.kind = ANY(%(kinds)s::text[]))
        GROUP BY j.kind, j.concurrency_key
    ) AS counted
    WHERE counted.due > 0 OR counted.running > 0
) AS ranked
WHERE ranked.nth <= %(limit)s
ORDER BY ranked.kind, ranked.nth
