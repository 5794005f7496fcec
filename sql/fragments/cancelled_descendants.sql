-- Fragment {cancelled_descendants}: the recursive CTE `tree` (id) of the cancelled
-- descendants of job %(id)s: its cancelled children, their cancelled children, ...
tree (id) AS (
    SELECT d.child_id
    FROM {deps} AS d JOIN {jobs} AS j ON j.id = d.child_id AND j.status = 'cancelled'
    WHERE d.parent_id = %(id)s
    UNION
    SELECT d.child_id
    FROM tree AS t
    JOIN {deps} AS d ON d.parent_id = t.id
    JOIN {jobs} AS j ON j.id = d.child_id AND j.status = 'cancelled'
)
