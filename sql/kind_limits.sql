-- Every kind with a row of flow control: its pause and latest declared limits, without
-- the count of its claimed jobs that kinds.sql adds. Workers read this every few seconds:
-- a count of claimed jobs steps over every dead claimed version in the index, all of
-- them while a held-back xmin horizon keeps vacuum from removing any.
-- Parameters: none. Returns: kind, paused, concurrency, key_concurrency, rate_limit,
-- rate_window, fair.
SELECT k.kind, k.paused, k.concurrency, k.key_concurrency, k.rate_limit, k.rate_window,
       k.fair
FROM {kinds} AS k
ORDER BY k.kind
