-- Records a worker's declaration of the limits of the kinds it runs (None: no limit).
-- The latest declaration wins: each kind's limits, declared_by and declared_at are
-- replaced; its pause flag and the rate's recorded starts are kept. Rows are written in
-- kind order, the order claims lock them in.
-- Parameters: kinds, concurrencies, key_concurrencies, rate_limits, rate_windows (arrays
-- of one element per kind), declared_by. Returns: nothing.
INSERT INTO {kinds} AS k
    (kind, concurrency, key_concurrency, rate_limit, rate_window, declared_by, declared_at)
SELECT d.kind, d.concurrency, d.key_concurrency, d.rate_limit, d.rate_window,
       %(declared_by)s, now()
FROM unnest(%(kinds)s::text[], %(concurrencies)s::integer[], %(key_concurrencies)s::integer[],
            %(rate_limits)s::integer[], %(rate_windows)s::float8[])
     AS d (kind, concurrency, key_concurrency, rate_limit, rate_window)
ORDER BY d.kind
ON CONFLICT (kind) DO UPDATE
SET concurrency = excluded.concurrency,
    key_concurrency = excluded.key_concurrency,
    rate_limit = excluded.rate_limit,
    rate_window = excluded.rate_window,
    declared_by = excluded.declared_by,
    declared_at = excluded.declared_at
