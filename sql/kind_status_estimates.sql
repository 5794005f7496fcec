-- Estimated jobs per (kind, status) from the joint statistics ANALYZE gathered (their
-- most common combinations and each one's share of the table), scaled to the table's
-- estimated rows. A combination too rare to be listed is missing (about none).
-- Parameters: table, statistics (names). Returns: kind, status, estimated rows.
SELECT v.vals[1], v.vals[2], round(v.freq * c.reltuples)::bigint
FROM pg_stats_ext AS s
JOIN pg_class AS c ON c.oid = to_regclass(%(table)s)
CROSS JOIN LATERAL (
    SELECT array[s.most_common_vals[i][1], s.most_common_vals[i][2]] AS vals,
           s.most_common_freqs[i] AS freq
    FROM generate_subscripts(s.most_common_freqs, 1) AS i
) AS v
WHERE s.statistics_name = %(statistics)s AND s.tablename = c.relname
  AND s.schemaname = c.relnamespace::regnamespace::text
