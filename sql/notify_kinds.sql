-- Sends one notification per kind on the prefix's channel, for jobs written by a COPY in
-- the same transaction (a COPY cannot notify): delivered when that transaction commits.
-- Parameters: kinds (distinct). Returns: one row per kind.
SELECT pg_notify({channel}, k.kind) FROM unnest(%(kinds)s::text[]) AS k (kind)
