-- Inserts many jobs (without dedup keys) from parallel arrays in one statement and
-- sends one notification per distinct kind, not one per row. The arrays travel in
-- binary (the "b" placeholder format), which spares the client quoting and escaping every
-- element. Jobs of a fair kind are tagged (fragment fair_tags).
-- Parameters: ids, kinds, payloads (JSON text), priorities, delays (s), ats, max_attempts,
-- concurrency_keys, trace_contexts (JSON text or null).
-- Returns: the number of distinct kinds notified.
WITH batch AS MATERIALIZED (
    SELECT *
    FROM unnest(%(ids)b::uuid[], %(kinds)b::text[], %(payloads)b::jsonb[],
                %(priorities)b::smallint[], %(delays)b::float8[], %(ats)b::timestamptz[],
                %(max_attempts)b::integer[], %(concurrency_keys)b::text[],
                %(trace_contexts)b::jsonb[])
         WITH ORDINALITY
         AS j (id, kind, payload, priority, delay, at, max_attempts, concurrency_key,
               trace_context, n)
),
{fair_tags},
inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, visible_at, max_attempts, concurrency_key,
                        trace_context, fair_tag)
    SELECT j.id, j.kind, j.payload, j.priority,
           coalesce(j.at, now() + make_interval(secs => coalesce(j.delay, 0))),
           j.max_attempts, j.concurrency_key, j.trace_context, tags.tag
    FROM batch AS j
    LEFT JOIN tags ON tags.n = j.n
    RETURNING kind
)
SELECT count(*)
FROM (SELECT DISTINCT kind FROM inserted) AS k
CROSS JOIN LATERAL (SELECT pg_notify({channel}, k.kind)) AS n
