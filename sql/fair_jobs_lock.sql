-- Waits for every transaction writing the jobs table to end and holds new writes back
-- until this transaction ends: a job enqueued while a kind turns fair is then either
-- written before (and tagged by fair_tag_existing.sql) or sees the kind fair (and is
-- tagged as it is written). The mode conflicts with itself, so two transactions turning
-- kinds fair never both hold it while each waits to write the jobs the other holds back.
-- Runs only when a declaration turns a kind fair, after fair_becoming.sql.
-- Parameters: none. Returns: nothing.
LOCK TABLE {jobs} IN SHARE ROW EXCLUSIVE MODE
