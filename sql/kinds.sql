-- Every kind with a row of flow control (declared by a worker, or paused), with the
-- number of its jobs claimed now.
-- Parameters: none. Returns: kind, paused, paused_at, concurrency, key_concurrency,
-- rate_limit, rate_window, declared_by, declared_at, running, fair (KindState.from_row
-- order).
SELECT k.kind, k.paused, k.paused_at, k.concurrency, k.key_concurrency, k.rate_limit,
       k.rate_window, k.declared_by, k.declared_at,
       (SELECT count(*) FROM {jobs} AS j WHERE j.status = 'claimed' AND j.kind = k.kind),
       k.fair
FROM {kinds} AS k
ORDER BY k.kind
