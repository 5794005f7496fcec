-- The weights set for the keys of fair kinds (of %(kind)s only, unless it is NULL).
-- Parameters: kind (nullable). Returns: kind, key, weight, by kind then key.
SELECT w.kind, w.key, w.weight
FROM {fair_weights} AS w
WHERE %(kind)s::text IS NULL OR w.kind = %(kind)s
ORDER BY w.kind, w.key
