-- Sets the weights of keys of a fair kind (a NULL weight removes the key's row: back to
-- 1) and respaces each named key's pending jobs by its new weight, from its first
-- pending tag at each priority, so claims follow the new weights at once. Nothing is
-- written unless the kind's row says fair (it is locked meanwhile).
-- Parameters: kind, keys (text[]), weights (float8[], NULL to remove).
-- Returns: the kind when it is fair, else no row.
WITH fair AS (
    SELECT k.kind FROM {kinds} AS k WHERE k.kind = %(kind)s AND k.fair FOR UPDATE
),
given AS (
    SELECT g.key, g.weight
    FROM unnest(%(keys)s::text[], %(weights)s::float8[]) AS g (key, weight)
),
removed AS (
    DELETE FROM {fair_weights} AS w
    USING fair, given
    WHERE w.kind = fair.kind AND w.key = given.key AND given.weight IS NULL
),
stored AS (
    INSERT INTO {fair_weights} (kind, key, weight)
    SELECT fair.kind, given.key, given.weight
    FROM fair CROSS JOIN given
    WHERE given.weight IS NOT NULL
    ON CONFLICT (kind, key) DO UPDATE SET weight = excluded.weight
),
spaced AS (
    SELECT j.id,
           first_value(j.fair_tag) OVER key_order
               + (row_number() OVER key_order - 1) / coalesce(given.weight, 1.0) AS tag
    FROM fair
    JOIN given ON true
    JOIN {jobs} AS j ON j.kind = fair.kind AND j.concurrency_key = given.key
    WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL
    WINDOW key_order AS (PARTITION BY j.concurrency_key, j.priority ORDER BY j.fair_tag, j.id)
),
respaced AS (
    UPDATE {jobs} AS j SET fair_tag = spaced.tag
    FROM spaced
    WHERE j.id = spaced.id AND j.status = 'pending'
)
SELECT fair.kind FROM fair
