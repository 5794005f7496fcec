-- The fair-share tags a COPY's jobs take (a COPY computes no value, so the client writes
-- them): for each distinct (kind, priority, key) of the batch whose kind is fair, the
-- tag of its first job and the step between its jobs (fragment fair_tags). Runs in the
-- COPY's transaction, before it.
-- Parameters: kinds, priorities, keys (parallel arrays, one element per distinct
-- triple). Returns: kind, priority, key, first tag, step (no row for other kinds).
WITH batch AS MATERIALIZED (
    SELECT b.n, NULL::uuid AS id, b.kind, b.priority, b.concurrency_key
    FROM unnest(%(kinds)s::text[], %(priorities)s::smallint[], %(keys)s::text[])
         WITH ORDINALITY AS b (kind, priority, concurrency_key, n)
),
{fair_tags}
SELECT fair_keys.kind, fair_keys.priority, fair_keys.concurrency_key, fair_keys.first_tag,
       fair_keys.step
FROM fair_keys
