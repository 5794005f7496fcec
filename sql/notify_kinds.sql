-- Sends one notification per kind on the prefix's channel, for jobs written by a COPY in
-- the same transaction (a COPY cannot notify): delivered when that transaction commits.
-- Says which of the kinds are fair, whose jobs the COPY writes with their tags
-- (fair_bases.sql); runs after copy_lock.sql.
-- Parameters: kinds (distinct). Returns: one row per kind: the kind, whether it is fair,
-- and pg_notify's void.
SELECT k.kind, coalesce(f.fair, false), pg_notify({channel}, k.kind)
FROM unnest(%(kinds)s::text[]) AS k (kind)
LEFT JOIN {kinds} AS f ON f.kind = k.kind
