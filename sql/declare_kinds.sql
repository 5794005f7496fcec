-- Records a worker's declaration of the limits of the kinds it runs (None: no limit) and
-- whether each is fair. The latest declaration wins: each kind's limits, fairness,
-- declared_by and declared_at are replaced; its pause flag and the rate's recorded
-- starts are kept. Rows are written in kind order, the order claims lock them in.
-- Parameters: kinds, concurrencies, key_concurrencies, rate_limits, rate_windows, fairs
-- (arrays of one element per kind), declared_by. Returns: nothing.
INSERT INTO {kinds} AS k
    (kind, concurrency, key_concurrency, rate_limit, rate_window, fair, declared_by,
     declared_at)
SELECT d.kind, d.concurrency, d.key_concurrency, d.rate_limit, d.rate_window, d.fair,
       %(declared_by)s, now()
FROM unnest(%(kinds)s::text[], %(concurrencies)s::integer[], %(key_concurrencies)s::integer[],
            %(rate_limits)s::integer[], %(rate_windows)s::float8[], %(fairs)s::boolean[])
     AS d (kind, concurrency, key_concurrency, rate_limit, rate_window, fair)
ORDER BY d.kind
ON CONFLICT (kind) DO UPDATE
SET concurrency = excluded.concurrency,
    key_concurrency = excluded.key_concurrency,
    rate_limit = excluded.rate_limit,
    rate_window = excluded.rate_window,
    fair = excluded.fair,
    declared_by = excluded.declared_by,
    declared_at = excluded.declared_at
