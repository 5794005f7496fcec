-- The oldest transaction id seen holding back this database's xmin horizon (fragment
-- horizon_holders), as text, and its age in transactions. NULLs when none is seen. While
-- it stays the same, a vacuum can remove no row version that died after the last vacuum
-- began (`venturi.worker.vacuuming`).
-- Parameters: none. Returns: one row.
WITH {horizon_holders}
SELECT h.xid::text, h.xmin_age
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT holders.xid, holders.xmin_age FROM holders ORDER BY holders.xmin_age DESC LIMIT 1
) AS h ON true
