-- Takes the lock a COPY of new jobs takes on {jobs} (ROW EXCLUSIVE) before the statements
-- that prepare it read anything: a declaration turning a kind fair (fair_jobs_lock.sql)
-- then either committed before them, and notify_kinds.sql sees the kind fair, or waits
-- for the COPY's transaction to end and tags its jobs with the others already written.
-- Parameters: none. Returns: nothing.
LOCK TABLE {jobs} IN ROW EXCLUSIVE MODE
