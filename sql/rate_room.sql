-- Database-clock seconds until the first of the given kinds whose rate is used up may
-- start a run again: when enough of the window's oldest starts have left the window.
-- Parameters: kinds (text[]). Returns: one row, NULL when none of them is rate-limited,
-- 0 when one of them has room now.
SELECT min(CASE
               WHEN cardinality(w.starts) < k.rate_limit THEN 0
               ELSE greatest(0, extract(epoch FROM
                   w.starts[cardinality(w.starts) - k.rate_limit + 1]
                   + make_interval(secs => k.rate_window) - statement_timestamp()))
           END)::float8
FROM {kinds} AS k
CROSS JOIN LATERAL (
    SELECT ARRAY(
        SELECT s.at FROM unnest(k.rate_starts) AS s (at)
        WHERE s.at > statement_timestamp() - make_interval(secs => k.rate_window)
        ORDER BY s.at
    ) AS starts
) AS w
WHERE k.kind = ANY(%(kinds)s::text[]) AND k.rate_limit IS NOT NULL AND NOT k.paused
