-- Fragment {fair_tags}: the CTEs `fair_keys` and `tags` (n, id, tag): from the CTE `batch`
-- (n, id, kind, priority, concurrency_key) of new jobs in their order, the fair-share tag of
-- each job of a fair kind (jobs of other kinds have no row). A key's first new job at a
-- priority is tagged as one enqueued alone (fragment fair_tag); each later one of the
-- batch 1/weight after it. Each distinct key is probed once, however many jobs it has.
fair_keys AS MATERIALIZED (
    SELECT keys.kind, keys.priority, keys.concurrency_key,
           1.0 / coalesce(w.weight, 1.0) AS step,
           greatest(
               (SELECT j.fair_tag FROM {jobs} AS j
                WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL
                  AND j.kind = keys.kind AND j.priority = keys.priority
                  AND j.visible_at <= now()
                ORDER BY j.fair_tag
                LIMIT 1),
               coalesce(
                   (SELECT j.fair_tag FROM {jobs} AS j
                    WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL
                      AND j.kind = keys.kind AND j.concurrency_key = keys.concurrency_key
                      AND j.priority = keys.priority
                    ORDER BY j.fair_tag DESC
                    LIMIT 1),
                   (SELECT j.fair_tag FROM {jobs} AS j
                    WHERE keys.concurrency_key IS NULL
                      AND j.status = 'pending' AND j.fair_tag IS NOT NULL
                      AND j.kind = keys.kind AND j.concurrency_key IS NULL
                      AND j.priority = keys.priority
                    ORDER BY j.fair_tag DESC
                    LIMIT 1)
               ) + 1.0 / coalesce(w.weight, 1.0),
               0
           ) AS first_tag
    FROM (SELECT DISTINCT batch.kind, batch.priority, batch.concurrency_key FROM batch) AS keys
    JOIN {kinds} AS k ON k.kind = keys.kind AND k.fair
    LEFT JOIN {fair_weights} AS w ON w.kind = keys.kind AND w.key = keys.concurrency_key
),
tags AS MATERIALIZED (
    SELECT batch.n, batch.id,
           fair_keys.first_tag + fair_keys.step * (
               row_number() OVER (
                   PARTITION BY batch.kind, batch.priority, batch.concurrency_key
                   ORDER BY batch.n) - 1
           ) AS tag
    FROM batch
    JOIN fair_keys ON fair_keys.kind = batch.kind AND fair_keys.priority = batch.priority
        -- a key is never empty, so '' stands for the jobs without one (a hashable join)
        AND coalesce(fair_keys.concurrency_key, '') = coalesce(batch.concurrency_key, '')
)
