-- Removes the jobs table's dead row versions and their index entries now, between
-- autovacuum's visits (once per autovacuum_naptime, a minute by default, during which
-- a busy queue leaves hundreds of thousands). A plain VACUUM: it takes no lock that
-- claims, enqueues or settlements wait for; SKIP_LOCKED returns at once when another
-- vacuum of the table is under way (another worker's, or autovacuum's).
-- Runs outside a transaction block (an autocommit connection), never prepared.
-- Parameters: none. Returns: nothing.
VACUUM (SKIP_LOCKED) {jobs}
