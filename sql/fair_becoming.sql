-- Which of these kinds the database does not hold fair yet (no row, or a row that is not
-- fair): declaring them fair must tag their jobs already written (fair_tag_existing.sql).
-- Locks the rows that exist, so two workers declaring at once take turns.
-- Parameters: kinds (text[]). Returns: each such kind.
SELECT w.kind
FROM unnest(%(kinds)s::text[]) AS w (kind)
WHERE NOT coalesce(
    (SELECT k.fair FROM {kinds} AS k WHERE k.kind = w.kind FOR UPDATE), false)
ORDER BY w.kind
